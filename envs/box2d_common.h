/*
 * Shared parts of the Box2D envs (C++, internal): the revolute joint solved
 * as Gymnasium's Box2D solves it, the instance RNG, the parameter parser,
 * the per-episode action log that save/load replays, the serialized form
 * of an instance, and the ABI hooks both envs share (create, destroy,
 * seed, check_state, save, load).
 *
 * An instance's RNG is either the stepring one (sr_rng, seeded from
 * (seed, index), the default) or, with the parameter rng=numpy, a copy of
 * NumPy's Generator(PCG64(SeedSequence(seed + index))) with NumPy's
 * uniform() and integers() (the 32-bit Lemire path with its buffered half
 * word), so that instance i seeded with s draws what Gymnasium's
 * env.reset(seed=s + i) draws: the reference trajectories can then be
 * replayed with the same terrain, initial force and engine dispersion.
 *
 * Save/load: an instance is a function of its RNG at the start of the
 * episode and the actions of the episode so far (each reset builds a new
 * world; Box2D is deterministic for the same inputs in one build). save
 * writes both, with the current RNG and a hash of the current obs as
 * checks; load rebuilds the episode, replays the actions and compares both
 * (bytes that are not a save of this build's env give -EINVAL).
 */
#ifndef SR_BOX2D_COMMON_H
#define SR_BOX2D_COMMON_H

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <vector>

#include <box2d/box2d.h>

#include "envs.h"
#include "np_random.h"

extern "C" int sr__errorf(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

namespace sr_b2 {

/* ---- timing of b2World::Step alone (bench env's ceiling) ------------------ */

extern thread_local bool world_timing;
extern thread_local uint64_t world_ns, world_steps;

static inline uint64_t mono_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: robust on a shared machine */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Gymnasium's world.Step(1 / FPS, 6 * 30, 2 * 30), timed when asked. */
static inline void world_step(b2World *w)
{
	if (!world_timing) {
		w->Step((float)(1.0 / 50), 6 * 30, 2 * 30);
		return;
	}
	uint64_t t0 = mono_ns();
	w->Step((float)(1.0 / 50), 6 * 30, 2 * 30);
	world_ns += mono_ns() - t0;
	world_steps++;
}

/* ---- the revolute joint as Gymnasium's Box2D solves it -------------------- */

/*
 * Box2D 2.4 solves a revolute joint's point constraint (2x2) and its lower
 * and upper limits (speculative, one at a time) separately; the Box2D
 * Gymnasium runs (2.3, pybox2d) solves the point constraint and an active
 * limit together as one 3x3 block (the limit active from the step's start
 * when the angle is at or past it, its impulse clamped to one sign, the
 * point constraint alone re-solved when the clamp bites), and corrects
 * positions the same way. The difference matters here: the legs are light
 * bodies on long lever arms (the lander's anchor is 0.9 m from the leg's
 * centre), and when a leg hits the ground at speed, the separate solves
 * converge too slowly in 180 iterations: the limit gives way, the leg
 * swings through it and back, and the lander is thrown up spinning (about
 * 1 random-policy episode in 20 ended with a return of -400 to -1100, which
 * Gymnasium's never reaches).
 *
 * Revolute23 is a b2RevoluteJoint whose three solver steps are the 2.3
 * algorithm (written from its description; the same data and formulas, no
 * other change). adopt() turns a joint the world created into one: the
 * class adds no data member (its extra state, the limit impulse and state
 * and the 3x3 mass, lives in a Rev23State the env owns, reached through
 * the joint's user data), so the object is copied into a Revolute23 and
 * back over itself, which replaces only the dispatch to the solver steps.
 * The base class's InitVelocityConstraints still computes the island
 * indices, masses and anchors (with its own impulses zeroed it changes no
 * velocity).
 */
struct Rev23State {
	b2Mat33 mass;  /* the point + angle block */
	float impulse_z; /* the limit's accumulated impulse */
	int limit;       /* LIMIT_* below, from the step's start */
};

class Revolute23 : public b2RevoluteJoint {
public:
	enum { LIMIT_INACTIVE, LIMIT_LOWER, LIMIT_UPPER, LIMIT_EQUAL };

	/* @j was made from a def whose userData.pointer is @st. */
	static void adopt(b2RevoluteJoint *j, Rev23State *st)
	{
		static_assert(sizeof(Revolute23) == sizeof(b2RevoluteJoint), "no data members");
		st->mass.SetZero();
		st->impulse_z = 0.0f;
		st->limit = LIMIT_INACTIVE;
		Revolute23 r(*j);
		memcpy((void *)j, (const void *)&r, sizeof(r));
	}

protected:
	explicit Revolute23(const b2RevoluteJoint &j) : b2RevoluteJoint(j) {}

	Rev23State *st() const { return (Rev23State *)m_userData.pointer; }

	void InitVelocityConstraints(const b2SolverData &data) override
	{
		b2Vec2 imp = m_impulse;
		float motor = m_motorImpulse;
		m_impulse.SetZero();
		m_motorImpulse = m_lowerImpulse = m_upperImpulse = 0.0f;
		b2RevoluteJoint::InitVelocityConstraints(data); /* indices, masses, rA, rB */
		m_impulse = imp;
		m_motorImpulse = motor;

		Rev23State *s = st();
		float aA = data.positions[m_indexA].a, aB = data.positions[m_indexB].a;
		b2Vec2 vA = data.velocities[m_indexA].v, vB = data.velocities[m_indexB].v;
		float wA = data.velocities[m_indexA].w, wB = data.velocities[m_indexB].w;
		float mA = m_invMassA, mB = m_invMassB, iA = m_invIA, iB = m_invIB;
		bool fixed = iA + iB == 0.0f;

		s->mass.ex.x = mA + mB + m_rA.y * m_rA.y * iA + m_rB.y * m_rB.y * iB;
		s->mass.ey.x = -m_rA.y * m_rA.x * iA - m_rB.y * m_rB.x * iB;
		s->mass.ez.x = -m_rA.y * iA - m_rB.y * iB;
		s->mass.ex.y = s->mass.ey.x;
		s->mass.ey.y = mA + mB + m_rA.x * m_rA.x * iA + m_rB.x * m_rB.x * iB;
		s->mass.ez.y = m_rA.x * iA + m_rB.x * iB;
		s->mass.ex.z = s->mass.ez.x;
		s->mass.ey.z = s->mass.ez.y;
		s->mass.ez.z = iA + iB;
		/* m_axialMass is 1 / (iA + iB) (the motor's mass) */
		if (!m_enableMotor || fixed)
			m_motorImpulse = 0.0f;
		if (m_enableLimit && !fixed) {
			float angle = aB - aA - m_referenceAngle;
			if (b2Abs(m_upperAngle - m_lowerAngle) < 2.0f * b2_angularSlop) {
				s->limit = LIMIT_EQUAL;
			} else if (angle <= m_lowerAngle) {
				if (s->limit != LIMIT_LOWER)
					s->impulse_z = 0.0f;
				s->limit = LIMIT_LOWER;
			} else if (angle >= m_upperAngle) {
				if (s->limit != LIMIT_UPPER)
					s->impulse_z = 0.0f;
				s->limit = LIMIT_UPPER;
			} else {
				s->limit = LIMIT_INACTIVE;
				s->impulse_z = 0.0f;
			}
		} else {
			s->limit = LIMIT_INACTIVE;
		}
		if (data.step.warmStarting) {
			m_impulse *= data.step.dtRatio;
			s->impulse_z *= data.step.dtRatio;
			m_motorImpulse *= data.step.dtRatio;
			b2Vec2 P(m_impulse.x, m_impulse.y);
			vA -= mA * P;
			wA -= iA * (b2Cross(m_rA, P) + m_motorImpulse + s->impulse_z);
			vB += mB * P;
			wB += iB * (b2Cross(m_rB, P) + m_motorImpulse + s->impulse_z);
		} else {
			m_impulse.SetZero();
			s->impulse_z = 0.0f;
			m_motorImpulse = 0.0f;
		}
		data.velocities[m_indexA].v = vA;
		data.velocities[m_indexA].w = wA;
		data.velocities[m_indexB].v = vB;
		data.velocities[m_indexB].w = wB;
	}

	void SolveVelocityConstraints(const b2SolverData &data) override
	{
		Rev23State *s = st();
		b2Vec2 vA = data.velocities[m_indexA].v, vB = data.velocities[m_indexB].v;
		float wA = data.velocities[m_indexA].w, wB = data.velocities[m_indexB].w;
		float mA = m_invMassA, mB = m_invMassB, iA = m_invIA, iB = m_invIB;
		bool fixed = iA + iB == 0.0f;

		if (m_enableMotor && s->limit != LIMIT_EQUAL && !fixed) {
			float Cdot = wB - wA - m_motorSpeed;
			float impulse = -m_axialMass * Cdot;
			float old = m_motorImpulse, max = data.step.dt * m_maxMotorTorque;
			m_motorImpulse = b2Clamp(m_motorImpulse + impulse, -max, max);
			impulse = m_motorImpulse - old;
			wA -= iA * impulse;
			wB += iB * impulse;
		}
		if (m_enableLimit && s->limit != LIMIT_INACTIVE && !fixed) {
			b2Vec2 Cdot1 = vB + b2Cross(wB, m_rB) - vA - b2Cross(wA, m_rA);
			float Cdot2 = wB - wA;
			b2Vec3 impulse = -s->mass.Solve33(b2Vec3(Cdot1.x, Cdot1.y, Cdot2));
			bool clamp = false;
			if (s->limit == LIMIT_LOWER)
				clamp = s->impulse_z + impulse.z < 0.0f;
			else if (s->limit == LIMIT_UPPER)
				clamp = s->impulse_z + impulse.z > 0.0f;
			if (clamp) { /* the limit lets go: the point constraint alone */
				b2Vec2 rhs = -Cdot1 + s->impulse_z * b2Vec2(s->mass.ez.x, s->mass.ez.y);
				b2Vec2 reduced = s->mass.Solve22(rhs);
				impulse.x = reduced.x;
				impulse.y = reduced.y;
				impulse.z = -s->impulse_z;
				m_impulse.x += reduced.x;
				m_impulse.y += reduced.y;
				s->impulse_z = 0.0f;
			} else {
				m_impulse.x += impulse.x;
				m_impulse.y += impulse.y;
				s->impulse_z += impulse.z;
			}
			b2Vec2 P(impulse.x, impulse.y);
			vA -= mA * P;
			wA -= iA * (b2Cross(m_rA, P) + impulse.z);
			vB += mB * P;
			wB += iB * (b2Cross(m_rB, P) + impulse.z);
		} else {
			b2Vec2 Cdot = vB + b2Cross(wB, m_rB) - vA - b2Cross(wA, m_rA);
			b2Vec2 impulse = s->mass.Solve22(-Cdot);
			m_impulse.x += impulse.x;
			m_impulse.y += impulse.y;
			vA -= mA * impulse;
			wA -= iA * b2Cross(m_rA, impulse);
			vB += mB * impulse;
			wB += iB * b2Cross(m_rB, impulse);
		}
		data.velocities[m_indexA].v = vA;
		data.velocities[m_indexA].w = wA;
		data.velocities[m_indexB].v = vB;
		data.velocities[m_indexB].w = wB;
	}

	bool SolvePositionConstraints(const b2SolverData &data) override
	{
		Rev23State *s = st();
		b2Vec2 cA = data.positions[m_indexA].c, cB = data.positions[m_indexB].c;
		float aA = data.positions[m_indexA].a, aB = data.positions[m_indexB].a;
		float angular_error = 0.0f, position_error;
		bool fixed = m_invIA + m_invIB == 0.0f;

		if (m_enableLimit && s->limit != LIMIT_INACTIVE && !fixed) {
			float angle = aB - aA - m_referenceAngle, limit_impulse = 0.0f, C;
			if (s->limit == LIMIT_EQUAL) {
				C = b2Clamp(angle - m_lowerAngle, -b2_maxAngularCorrection,
					    b2_maxAngularCorrection);
				limit_impulse = -m_axialMass * C;
				angular_error = b2Abs(C);
			} else if (s->limit == LIMIT_LOWER) {
				C = angle - m_lowerAngle;
				angular_error = -C;
				C = b2Clamp(C + b2_angularSlop, -b2_maxAngularCorrection, 0.0f);
				limit_impulse = -m_axialMass * C;
			} else {
				C = angle - m_upperAngle;
				angular_error = C;
				C = b2Clamp(C - b2_angularSlop, 0.0f, b2_maxAngularCorrection);
				limit_impulse = -m_axialMass * C;
			}
			aA -= m_invIA * limit_impulse;
			aB += m_invIB * limit_impulse;
		}
		{
			b2Rot qA(aA), qB(aB);
			b2Vec2 rA = b2Mul(qA, m_localAnchorA - m_localCenterA);
			b2Vec2 rB = b2Mul(qB, m_localAnchorB - m_localCenterB);
			b2Vec2 C = cB + rB - cA - rA;
			position_error = C.Length();
			float mA = m_invMassA, mB = m_invMassB, iA = m_invIA, iB = m_invIB;
			b2Mat22 K;
			K.ex.x = mA + mB + iA * rA.y * rA.y + iB * rB.y * rB.y;
			K.ex.y = -iA * rA.x * rA.y - iB * rB.x * rB.y;
			K.ey.x = K.ex.y;
			K.ey.y = mA + mB + iA * rA.x * rA.x + iB * rB.x * rB.x;
			b2Vec2 impulse = -K.Solve(C);
			cA -= mA * impulse;
			aA -= iA * b2Cross(rA, impulse);
			cB += mB * impulse;
			aB += iB * b2Cross(rB, impulse);
		}
		data.positions[m_indexA].c = cA;
		data.positions[m_indexA].a = aA;
		data.positions[m_indexB].c = cB;
		data.positions[m_indexB].a = aB;
		return position_error <= b2_linearSlop && angular_error <= b2_angularSlop;
	}
};

/* ---- the instance RNG ---------------------------------------------------- */

struct Rng {
	uint32_t numpy; /* 0: sr_rng; 1: NumPy PCG64 */
	uint32_t pad;
	sr_rng x;
	sr_np_pcg64 pcg;

	void seed(bool np, uint64_t seed, uint64_t index)
	{
		memset(this, 0, sizeof(*this));
		numpy = np;
		if (np)
			sr_np_seed(&pcg, seed + index);
		else
			sr_rng_seed(&x, seed, index);
	}
	/* NumPy's uniform(lo, hi): lo + (hi - lo) * (53 bits / 2^53). */
	double uniform(double lo, double hi)
	{
		uint64_t r = numpy ? sr_np_next64(&pcg) : sr_rng_next(&x);
		return lo + (hi - lo) * ((double)(r >> 11) * 0x1.0p-53);
	}
	/* Integer in [lo, hi), hi - lo < 2^32: NumPy's Lemire method on 32-bit
	 * draws (rejecting the few biased ones). */
	int64_t integers(int64_t lo, int64_t hi)
	{
		uint32_t r;
		SR_NP_LEMIRE32((uint32_t)(hi - lo), draw32(), r);
		return lo + (int64_t)r;
	}
	uint32_t draw32() { return numpy ? sr_np_next32(&pcg) : (uint32_t)(sr_rng_next(&x) >> 32); }
	bool same(const Rng &o) const { return !memcmp(this, &o, sizeof(*this)); }
};

/* ---- parameters: "key=value,..." ----------------------------------------- */

static inline uint64_t dbits(double d)
{
	uint64_t u;
	memcpy(&u, &d, 8);
	return u;
}

static inline double bitsd(uint64_t u)
{
	double d;
	memcpy(&d, &u, 8);
	return d;
}

/* Calls fn(key, value) for each pair; fn returns 0 or -EINVAL (it sets the
 * message). */
template <typename F>
static int parse_params(const char *id, const char *params, F fn)
{
	char key[32], val[64];
	const char *p = params;

	while (*p) {
		const char *eq = strchr(p, '='), *end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		if (!eq || eq > end || eq == p || (size_t)(eq - p) >= sizeof(key) ||
		    (size_t)(end - eq - 1) >= sizeof(val) || end == eq + 1)
			return sr__errorf(-EINVAL, "env '%s': bad parameter '%.*s' (key=value)", id,
					  (int)(end - p), p);
		memcpy(key, p, (size_t)(eq - p));
		key[eq - p] = '\0';
		memcpy(val, eq + 1, (size_t)(end - eq - 1));
		val[end - eq - 1] = '\0';
		int err = fn(key, val);
		if (err)
			return err;
		p = *end ? end + 1 : end;
	}
	return 0;
}

/* A finite double, or -EINVAL. */
static inline int parse_double(const char *id, const char *key, const char *val, double *out)
{
	char *e;
	double d = strtod(val, &e);

	if (*e || e == val || !std::isfinite(d))
		return sr__errorf(-EINVAL, "env '%s': %s='%s' is not a finite number", id, key, val);
	*out = d;
	return 0;
}

static inline int parse_bool(const char *id, const char *key, const char *val, bool *out)
{
	if (!strcmp(val, "1") || !strcmp(val, "true")) {
		*out = true;
		return 0;
	}
	if (!strcmp(val, "0") || !strcmp(val, "false")) {
		*out = false;
		return 0;
	}
	return sr__errorf(-EINVAL, "env '%s': %s='%s' must be 0 or 1", id, key, val);
}

/* ---- save format ---------------------------------------------------------- */

/* Header of a saved instance; the episode's actions follow (n_actions *
 * action_size bytes). */
struct SaveHeader {
	uint32_t magic;       /* per env type */
	uint32_t version;     /* 1 */
	uint32_t action_size; /* bytes per logged action */
	uint32_t flags;       /* SAVE_F_WORLD: an episode is running */
	uint32_t n_actions;
	uint32_t spec_hash;   /* the type's parameters, folded */
	uint64_t obs_hash;    /* hash of the obs now (a check after the replay) */
	Rng rng_start;        /* RNG before the reset that began the episode */
	Rng rng_now;          /* RNG now (a check after the replay) */
};

/* FNV-1a over the bytes of an obs. */
static inline uint64_t obs_hash(const float *obs, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const unsigned char *p = (const unsigned char *)obs;
	for (size_t i = 0; i < n * sizeof(float); i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

enum { SAVE_F_WORLD = 1 };

static inline uint32_t params_hash(const sr_env_spec *spec)
{
	uint64_t h = 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < 8; i++)
		h = (h ^ spec->params[i]) * 0xbf58476d1ce4e5b9ull;
	return (uint32_t)(h ^ (h >> 32));
}

/* The actions of the running episode, as the bytes the runtime passed. */
struct ActionLog {
	std::vector<unsigned char> bytes;
	uint32_t n = 0;
	bool overflow = false;

	void clear()
	{
		n = 0;
		overflow = false;
		bytes.clear();
	}
	void push(const void *a, size_t size, uint32_t cap)
	{
		if (n >= cap) {
			overflow = true;
			return;
		}
		const unsigned char *p = (const unsigned char *)a;
		bytes.insert(bytes.end(), p, p + size);
		n++;
	}
};

/* ---- what both envs' instances share: the ABI hooks around them ---------- */

/* spec->params[P_NUMPY]: rng=numpy (both envs; every built-in env's slot) */
enum { P_NUMPY = SR__P_RNG };

/* The part of an instance that seeding, save and load handle; an env's
 * struct derives from it and adds its bodies, a contact listener (whose
 * env member points back at the instance) and its episode state. */
struct Instance {
	b2World *world = nullptr;
	Rng rng, rng_start; /* now; before the reset that began the episode */
	ActionLog log;      /* the episode's actions (save replays them) */
};

/* The state bytes hold one pointer to the instance. */
template <typename T> inline T *inst(void *state)
{
	T *e;
	memcpy(&e, state, sizeof(e));
	return e;
}

template <typename T> inline const T *inst(const void *state)
{
	const T *e;
	memcpy(&e, state, sizeof(e));
	return e;
}

template <typename T> int create_instance(const sr_env_spec *spec, void *state)
{
	T *e = new (std::nothrow) T;
	if (!e)
		return -ENOMEM;
	try {
		e->log.bytes.reserve((size_t)spec->max_episode_steps * sr_env_action_size(spec));
	} catch (...) {
		delete e;
		return -ENOMEM;
	}
	e->listener.env = e;
	memcpy(state, &e, sizeof(e));
	return 0;
}

template <typename T> void destroy_instance(void *state)
{
	T *e = inst<T>(state);
	if (!e)
		return;
	delete e->world; /* frees every body, fixture and joint */
	delete e;
	memset(state, 0, sizeof(e));
}

template <typename T>
void seed_instances(const sr_env_spec *spec, void *states, size_t n, uint64_t seed, uint64_t first)
{
	for (size_t i = 0; i < n; i++)
		inst<T>((char *)states + i * spec->state_size)
			->rng.seed(spec->params[P_NUMPY] != 0, seed, first + i);
}

/* check_state of an instance whose motion is @b's: a finite pose and
 * velocity (0 before the first reset, when @e has no world). */
inline int check_instance(const Instance *e, const b2Body *b)
{
	if (!e)
		return -EINVAL;
	if (!e->world)
		return 0;
	b2Vec2 p = b->GetPosition(), v = b->GetLinearVelocity();
	if (!std::isfinite(p.x) || !std::isfinite(p.y) || !std::isfinite(v.x) ||
	    !std::isfinite(v.y) || !std::isfinite(b->GetAngle()))
		return -EINVAL;
	return 0;
}

/* save: the header (@obs: the obs now, hashed, when an episode runs) and
 * the episode's actions. */
inline int save_instance(const sr_env_spec *spec, const Instance *e, uint32_t magic,
			 const float *obs, size_t obs_dim, void *buf, size_t cap, size_t *len)
{
	size_t asz = sr_env_action_size(spec);
	SaveHeader h;

	if (e->log.overflow)
		return -EOVERFLOW; /* stepped past the time limit without a reset */
	size_t need = sizeof(h) + (size_t)e->log.n * asz;
	if (cap < need)
		return -ENOSPC;
	memset(&h, 0, sizeof(h));
	h.magic = magic;
	h.version = 1;
	h.action_size = (uint32_t)asz;
	h.flags = e->world ? SAVE_F_WORLD : 0;
	h.n_actions = e->log.n;
	h.spec_hash = params_hash(spec);
	if (e->world)
		h.obs_hash = obs_hash(obs, obs_dim);
	h.rng_start = e->rng_start;
	h.rng_now = e->rng;
	memcpy(buf, &h, sizeof(h));
	if (e->log.n)
		memcpy((char *)buf + sizeof(h), e->log.bytes.data(), (size_t)e->log.n * asz);
	*len = need;
	return 0;
}

/*
 * load: check the header; without an episode, @drop() the world and take
 * the RNGs; else rebuild the episode: the RNG of its start, @reset(obs),
 * then each logged action through @step(action, obs), and compare the RNG
 * and the obs with the saved ones (-EINVAL if they differ: not a save of
 * this build's env).
 */
template <typename Drop, typename Reset, typename Step>
int load_instance(const sr_env_spec *spec, Instance *e, uint32_t magic, size_t obs_dim,
		  const void *buf, size_t len, Drop drop, Reset reset, Step step)
{
	size_t asz = sr_env_action_size(spec);
	SaveHeader h;
	float obs[64];

	if (!e || len < sizeof(h) || obs_dim > 64)
		return -EINVAL;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != magic || h.version != 1 || h.action_size != asz ||
	    h.spec_hash != params_hash(spec) || h.n_actions > spec->max_episode_steps ||
	    len != sizeof(h) + (size_t)h.n_actions * asz || (h.flags & ~(uint32_t)SAVE_F_WORLD) ||
	    (!(h.flags & SAVE_F_WORLD) && h.n_actions))
		return -EINVAL;
	if (!(h.flags & SAVE_F_WORLD)) {
		drop();
		e->log.clear();
		e->rng = h.rng_now;
		e->rng_start = h.rng_start;
		return 0;
	}
	e->rng = h.rng_start;
	reset(obs);
	const char *acts = (const char *)buf + sizeof(h);
	for (uint32_t k = 0; k < h.n_actions; k++) {
		e->log.push(acts + (size_t)k * asz, asz, spec->max_episode_steps);
		step(acts + (size_t)k * asz, obs);
	}
	return e->rng.same(h.rng_now) && obs_hash(obs, obs_dim) == h.obs_hash ? 0 : -EINVAL;
}

} // namespace sr_b2

#endif
