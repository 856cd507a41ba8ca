/*
 * LunarLander-v3 and LunarLanderContinuous-v3 (Gymnasium 1.3.0) on Box2D
 * 2.4.1, behind the C env ABI (opaque state, ABI v2).
 *
 * Gymnasium's env, rebuilt from its description: a new b2World per reset
 * (gravity (0, g), sleeping allowed), the moon (a bottom edge and ten
 * terrain edges over 11 chunks, the helipad flat between x = 8 and 12),
 * the lander (a 6-vertex hull, density 5) with an initial random force,
 * two legs on revolute joints with motors and limits (solved as Gymnasium's
 * Box2D 2.3 solves them: Revolute23, box2d_common.h), a contact listener
 * (lander contact = game over, leg contact flags), main and side engines
 * as impulses with random dispersion, optional wind and turbulence, the
 * shaping reward, and termination on crash, leaving the screen (|x| >= 1)
 * or the lander falling asleep (+100). Reset ends with one no-op step, as
 * Gymnasium's does. Physics in Box2D's float; obs, reward and engine
 * geometry in double, the obs rounded to float32 at the end.
 *
 * Parameters ("LunarLander-v3:continuous=1,enable_wind=1"): continuous,
 * gravity (-12, 0), enable_wind, wind_power, turbulence_power, rng
 * (stepring | numpy). LunarLanderContinuous-v3 is continuous=1.
 *
 * The instance: the state holds one pointer to a heap object (struct
 * Lunar) that owns its world.
 */
#include <box2d/box2d.h>

#include "box2d_common.h"

using namespace sr_b2;

namespace {

const double FPS = 50, SCALE = 30.0;
const double MAIN_ENGINE_POWER = 13.0, SIDE_ENGINE_POWER = 0.6, INITIAL_RANDOM = 1000.0;
const double LEG_AWAY = 20, LEG_DOWN = 18, LEG_W = 2, LEG_H = 8, LEG_SPRING_TORQUE = 40;
const double SIDE_ENGINE_HEIGHT = 14, SIDE_ENGINE_AWAY = 12, MAIN_ENGINE_Y_LOCATION = 4;
const double VIEWPORT_W = 600, VIEWPORT_H = 400;
const double W = VIEWPORT_W / SCALE, H = VIEWPORT_H / SCALE;
const int CHUNKS = 11;
const double LANDER_POLY[6][2] = {{-14, 17}, {-17, 0}, {-17, -10}, {17, -10}, {17, 0}, {14, 17}};

/* params[] of the spec */
enum { P_CONTINUOUS, P_WIND, P_GRAVITY, P_WIND_POWER, P_TURBULENCE }; /* P_NUMPY: 5 */

const uint32_t MAGIC = 0x4c4c5253; /* "SRLL" */

struct Lunar;

class Listener : public b2ContactListener {
public:
	Lunar *env = nullptr;
	void BeginContact(b2Contact *c) override;
	void EndContact(b2Contact *c) override;
};

struct Lunar : Instance {
	b2Body *moon = nullptr, *lander = nullptr, *legs[2] = {nullptr, nullptr};
	Listener listener;
	double helipad_y = 0, prev_shaping = 0;
	int64_t wind_idx = 0, torque_idx = 0;
	bool game_over = false, contact[2] = {false, false}, has_prev = false;
	Rev23State jst[2]; /* the legs' joints' solver state (Revolute23) */
};

void Listener::BeginContact(b2Contact *c)
{
	b2Body *a = c->GetFixtureA()->GetBody(), *b = c->GetFixtureB()->GetBody();

	if (a == env->lander || b == env->lander)
		env->game_over = true;
	for (int i = 0; i < 2; i++)
		if (a == env->legs[i] || b == env->legs[i])
			env->contact[i] = true;
}

void Listener::EndContact(b2Contact *c)
{
	b2Body *a = c->GetFixtureA()->GetBody(), *b = c->GetFixtureB()->GetBody();

	for (int i = 0; i < 2; i++)
		if (a == env->legs[i] || b == env->legs[i])
			env->contact[i] = false;
}

inline bool continuous(const sr_env_spec *s)
{
	return s->params[P_CONTINUOUS] != 0;
}

void drop_world(Lunar *l)
{
	delete l->world; /* frees every body, fixture and joint */
	l->world = nullptr;
	l->moon = l->lander = l->legs[0] = l->legs[1] = nullptr;
}

/* The observation in double, as Gymnasium's state list. */
void state_of(const Lunar *l, double s[8])
{
	b2Vec2 pos = l->lander->GetPosition(), vel = l->lander->GetLinearVelocity();

	s[0] = ((double)pos.x - VIEWPORT_W / SCALE / 2) / (VIEWPORT_W / SCALE / 2);
	s[1] = ((double)pos.y - (l->helipad_y + LEG_DOWN / SCALE)) / (VIEWPORT_H / SCALE / 2);
	s[2] = (double)vel.x * (VIEWPORT_W / SCALE / 2) / FPS;
	s[3] = (double)vel.y * (VIEWPORT_H / SCALE / 2) / FPS;
	s[4] = (double)l->lander->GetAngle();
	s[5] = 20.0 * (double)l->lander->GetAngularVelocity() / FPS;
	s[6] = l->contact[0] ? 1.0 : 0.0;
	s[7] = l->contact[1] ? 1.0 : 0.0;
}

inline double wind_fn(int64_t k)
{
	return std::tanh(std::sin(0.02 * (double)k) + std::sin(M_PI * 0.01 * (double)k));
}

/* One env step; @a is an int32 (discrete) or two float32 (continuous). */
void do_step(const sr_env_spec *spec, Lunar *l, const void *a, float *obs, double *reward,
	     uint8_t *terminated)
{
	bool cont = continuous(spec);
	double act0 = 0, act1 = 0;
	int32_t da = 0;

	if (spec->params[P_WIND] && !(l->contact[0] || l->contact[1])) {
		double wind_mag = wind_fn(l->wind_idx) * bitsd(spec->params[P_WIND_POWER]);
		l->wind_idx++;
		l->lander->ApplyForceToCenter(b2Vec2((float)wind_mag, 0.0f), true);
		double torque_mag = wind_fn(l->torque_idx) * bitsd(spec->params[P_TURBULENCE]);
		l->torque_idx++;
		l->lander->ApplyTorque((float)torque_mag, true);
	}
	if (cont) {
		float f[2];
		memcpy(f, a, sizeof(f));
		act0 = std::fmin(std::fmax((double)f[0], -1.0), 1.0);
		act1 = std::fmin(std::fmax((double)f[1], -1.0), 1.0);
	} else {
		memcpy(&da, a, 4);
	}
	double angle = (double)l->lander->GetAngle();
	double tip[2] = {std::sin(angle), std::cos(angle)};
	double side[2] = {-tip[1], tip[0]};
	double disp[2];
	disp[0] = l->rng.uniform(-1.0, 1.0) / SCALE;
	disp[1] = l->rng.uniform(-1.0, 1.0) / SCALE;

	double m_power = 0.0;
	if ((cont && act0 > 0.0) || (!cont && da == 2)) {
		m_power = cont ? (std::fmin(std::fmax(act0, 0.0), 1.0) + 1.0) * 0.5 : 1.0;
		double ox = tip[0] * (MAIN_ENGINE_Y_LOCATION / SCALE + 2 * disp[0]) + side[0] * disp[1];
		double oy = -tip[1] * (MAIN_ENGINE_Y_LOCATION / SCALE + 2 * disp[0]) - side[1] * disp[1];
		b2Vec2 pos = l->lander->GetPosition();
		double px = (double)pos.x + ox, py = (double)pos.y + oy;
		l->lander->ApplyLinearImpulse(b2Vec2((float)(-ox * MAIN_ENGINE_POWER * m_power),
						     (float)(-oy * MAIN_ENGINE_POWER * m_power)),
					      b2Vec2((float)px, (float)py), true);
	}
	double s_power = 0.0;
	if ((cont && std::fabs(act1) > 0.5) || (!cont && (da == 1 || da == 3))) {
		double direction;
		if (cont) {
			direction = act1 > 0 ? 1.0 : -1.0;
			s_power = std::fmin(std::fmax(std::fabs(act1), 0.5), 1.0);
		} else {
			direction = (double)(da - 2);
			s_power = 1.0;
		}
		double ox = tip[0] * disp[0] +
			    side[0] * (3 * disp[1] + direction * SIDE_ENGINE_AWAY / SCALE);
		double oy = -tip[1] * disp[0] -
			    side[1] * (3 * disp[1] + direction * SIDE_ENGINE_AWAY / SCALE);
		b2Vec2 pos = l->lander->GetPosition();
		/* 17, not SIDE_ENGINE_HEIGHT, in x: as Gymnasium has it */
		double px = (double)pos.x + ox - tip[0] * 17 / SCALE;
		double py = (double)pos.y + oy + tip[1] * SIDE_ENGINE_HEIGHT / SCALE;
		l->lander->ApplyLinearImpulse(b2Vec2((float)(-ox * SIDE_ENGINE_POWER * s_power),
						     (float)(-oy * SIDE_ENGINE_POWER * s_power)),
					      b2Vec2((float)px, (float)py), true);
	}

	world_step(l->world);

	double s[8];
	state_of(l, s);
	double shaping = -100 * std::sqrt(s[0] * s[0] + s[1] * s[1]) -
			 100 * std::sqrt(s[2] * s[2] + s[3] * s[3]) - 100 * std::fabs(s[4]) +
			 10 * s[6] + 10 * s[7];
	double r = 0;
	if (l->has_prev)
		r = shaping - l->prev_shaping;
	l->prev_shaping = shaping;
	l->has_prev = true;
	r -= m_power * 0.30;
	r -= s_power * 0.03;
	bool term = false;
	if (l->game_over || std::fabs(s[0]) >= 1.0) {
		term = true;
		r = -100;
	}
	if (!l->lander->IsAwake()) {
		term = true;
		r = +100;
	}
	for (int i = 0; i < 8; i++)
		obs[i] = (float)s[i];
	*reward = r;
	*terminated = term;
}

b2Body *make_leg(Lunar *l, double i, double ix, double iy)
{
	b2BodyDef bd;
	bd.type = b2_dynamicBody;
	bd.position.Set((float)(ix - i * LEG_AWAY / SCALE), (float)iy);
	bd.angle = (float)(i * 0.05);
	b2Body *leg = l->world->CreateBody(&bd);
	b2PolygonShape box;
	box.SetAsBox((float)(LEG_W / SCALE), (float)(LEG_H / SCALE));
	b2FixtureDef fd;
	fd.shape = &box;
	fd.density = 1.0f;
	fd.restitution = 0.0f;
	fd.filter.categoryBits = 0x0020;
	fd.filter.maskBits = 0x001;
	leg->CreateFixture(&fd);

	b2RevoluteJointDef rjd;
	rjd.bodyA = l->lander;
	rjd.bodyB = leg;
	rjd.localAnchorA.Set(0, 0);
	rjd.localAnchorB.Set((float)(i * LEG_AWAY / SCALE), (float)(LEG_DOWN / SCALE));
	/* pybox2d's joint def takes the reference angle from the bodies when it
	 * is given both and no referenceAngle (the reference trajectories
	 * agree only so): the joint angle starts at 0, not at +-0.05. */
	rjd.referenceAngle = leg->GetAngle() - l->lander->GetAngle();
	rjd.enableMotor = true;
	rjd.enableLimit = true;
	rjd.maxMotorTorque = (float)LEG_SPRING_TORQUE;
	rjd.motorSpeed = (float)(0.3 * i);
	if (i < 0) {
		rjd.lowerAngle = (float)(0.9 - 0.5);
		rjd.upperAngle = 0.9f;
	} else {
		rjd.lowerAngle = -0.9f;
		rjd.upperAngle = (float)(-0.9 + 0.5);
	}
	Rev23State *st = &l->jst[i < 0 ? 0 : 1];
	rjd.userData.pointer = (uintptr_t)st;
	Revolute23::adopt((b2RevoluteJoint *)l->world->CreateJoint(&rjd), st);
	return leg;
}

/* Gymnasium's reset: a new world, terrain, lander, legs, one no-op step. */
void do_reset(const sr_env_spec *spec, Lunar *l, float *obs)
{
	l->rng_start = l->rng;
	l->log.clear();
	drop_world(l);
	l->world = new b2World(b2Vec2(0.0f, (float)bitsd(spec->params[P_GRAVITY])));
	l->world->SetContactListener(&l->listener);
	l->game_over = false;
	l->has_prev = false;
	l->contact[0] = l->contact[1] = false;

	double height[CHUNKS + 1], chunk_x[CHUNKS], smooth_y[CHUNKS];
	for (int i = 0; i < CHUNKS + 1; i++)
		height[i] = l->rng.uniform(0, H / 2);
	for (int i = 0; i < CHUNKS; i++)
		chunk_x[i] = W / (CHUNKS - 1) * i;
	l->helipad_y = H / 4;
	for (int i = CHUNKS / 2 - 2; i <= CHUNKS / 2 + 2; i++)
		height[i] = l->helipad_y;
	for (int i = 0; i < CHUNKS; i++) /* i - 1 = -1 wraps to the last, as in Python */
		smooth_y[i] = 0.33 * (height[i == 0 ? CHUNKS : i - 1] + height[i] + height[i + 1]);

	b2BodyDef sbd;
	l->moon = l->world->CreateBody(&sbd);
	b2EdgeShape edge;
	edge.SetTwoSided(b2Vec2(0, 0), b2Vec2((float)W, 0));
	b2FixtureDef efd; /* friction 0.2, density 0 */
	efd.shape = &edge;
	l->moon->CreateFixture(&efd);
	for (int i = 0; i < CHUNKS - 1; i++) {
		b2EdgeShape e;
		e.SetTwoSided(b2Vec2((float)chunk_x[i], (float)smooth_y[i]),
			      b2Vec2((float)chunk_x[i + 1], (float)smooth_y[i + 1]));
		b2FixtureDef fd;
		fd.shape = &e;
		fd.density = 0;
		fd.friction = 0.1f;
		l->moon->CreateFixture(&fd);
	}

	double iy = VIEWPORT_H / SCALE, ix = VIEWPORT_W / SCALE / 2;
	b2BodyDef bd;
	bd.type = b2_dynamicBody;
	bd.position.Set((float)ix, (float)iy);
	bd.angle = 0.0f;
	l->lander = l->world->CreateBody(&bd);
	b2Vec2 v[6];
	for (int i = 0; i < 6; i++)
		v[i].Set((float)(LANDER_POLY[i][0] / SCALE), (float)(LANDER_POLY[i][1] / SCALE));
	b2PolygonShape poly;
	poly.Set(v, 6);
	b2FixtureDef fd;
	fd.shape = &poly;
	fd.density = 5.0f;
	fd.friction = 0.1f;
	fd.filter.categoryBits = 0x0010;
	fd.filter.maskBits = 0x001;
	fd.restitution = 0.0f;
	l->lander->CreateFixture(&fd);
	double fx = l->rng.uniform(-INITIAL_RANDOM, INITIAL_RANDOM);
	double fy = l->rng.uniform(-INITIAL_RANDOM, INITIAL_RANDOM);
	l->lander->ApplyForceToCenter(b2Vec2((float)fx, (float)fy), true);
	if (spec->params[P_WIND]) {
		l->wind_idx = l->rng.integers(-9999, 9999);
		l->torque_idx = l->rng.integers(-9999, 9999);
	}
	l->legs[0] = make_leg(l, -1, ix, iy);
	l->legs[1] = make_leg(l, +1, ix, iy);

	static const int32_t noop_d = 0;
	static const float noop_c[2] = {0, 0};
	double r;
	uint8_t t;
	do_step(spec, l, continuous(spec) ? (const void *)noop_c : (const void *)&noop_d, obs, &r,
		&t);
}

/* ---- the C ABI -------------------------------------------------------------- */

int ll_create(const sr_env_spec *spec, void *state)
{
	return create_instance<Lunar>(spec, state);
}

void ll_destroy(const sr_env_spec *spec, void *state)
{
	destroy_instance<Lunar>(state);
}

void ll_seed(const sr_env_spec *spec, void *states, size_t n, uint64_t seed, uint64_t first)
{
	seed_instances<Lunar>(spec, states, n, seed, first);
}

void ll_reset(const sr_env_spec *spec, void *states, size_t n, float *obs)
{
	for (size_t i = 0; i < n; i++)
		do_reset(spec, inst<Lunar>((char *)states + i * spec->state_size), obs + 8 * i);
}

void ll_step(const sr_env_spec *spec, void *states, size_t n, const void *actions, float *obs,
	     double *reward, uint8_t *terminated)
{
	size_t asz = sr_env_action_size(spec);

	for (size_t i = 0; i < n; i++) {
		Lunar *l = inst<Lunar>((char *)states + i * spec->state_size);
		const char *a = (const char *)actions + i * asz;
		if (!l->world) { /* never reset: nothing to step */
			memset(obs + 8 * i, 0, 8 * sizeof(float));
			reward[i] = 0;
			terminated[i] = 1;
			continue;
		}
		l->log.push(a, asz, spec->max_episode_steps);
		do_step(spec, l, a, obs + 8 * i, reward + i, terminated + i);
	}
}

void ll_observe(const sr_env_spec *spec, const void *state, float *obs)
{
	const Lunar *l = inst<Lunar>(state);
	double s[8];

	if (!l->world) {
		memset(obs, 0, 8 * sizeof(float));
		return;
	}
	state_of(l, s);
	for (int i = 0; i < 8; i++)
		obs[i] = (float)s[i];
}

int ll_check_state(const sr_env_spec *spec, const void *state)
{
	const Lunar *l = inst<Lunar>(state);
	return check_instance(l, l ? l->lander : nullptr);
}

int ll_save(const sr_env_spec *spec, const void *state, void *buf, size_t cap, size_t *len)
{
	float o[8];
	ll_observe(spec, state, o);
	return save_instance(spec, inst<Lunar>(state), MAGIC, o, 8, buf, cap, len);
}

int ll_load(const sr_env_spec *spec, void *state, const void *buf, size_t len)
{
	Lunar *l = inst<Lunar>(state);
	double r;
	uint8_t t;
	return load_instance(
		spec, l, MAGIC, 8, buf, len, [&] { drop_world(l); },
		[&](float *obs) { do_reset(spec, l, obs); },
		[&](const void *a, float *obs) { do_step(spec, l, a, obs, &r, &t); });
}

const float obs_low[8] = {-2.5f, -2.5f, -10.0f, -10.0f, (float)(-2 * M_PI), -10.0f, -0.0f, -0.0f};
const float obs_high[8] = {2.5f, 2.5f, 10.0f, 10.0f, (float)(2 * M_PI), 10.0f, 1.0f, 1.0f};
const float act_low[2] = {-1.0f, -1.0f};
const float act_high[2] = {1.0f, 1.0f};

/* Header plus one action per step of an episode. */
constexpr uint32_t save_bound(uint32_t asz)
{
	return (uint32_t)sizeof(SaveHeader) + 1000u * asz;
}

} // namespace

namespace sr_b2 {
thread_local bool world_timing = false;
thread_local uint64_t world_ns = 0, world_steps = 0;
} // namespace sr_b2

extern "C" {

void sr__box2d_world_timing(int on, uint64_t *ns, uint64_t *steps)
{
	if (ns)
		*ns = world_ns;
	if (steps)
		*steps = world_steps;
	world_timing = on != 0;
	world_ns = world_steps = 0;
}

/* Gymnasium's LunarLander attributes. They are chosen when the pool is
 * made ("LunarLander-v3:gravity=-9,enable_wind=1", gymnasium.make's
 * keywords), not on a live pool: a checkpoint replays each running
 * episode from its start (ll_save), which a parameter changed in the
 * middle of it would replay wrongly. */
#define LL_NOTE "a checkpoint replays the running episode from its start, which a change in the middle of it would make wrong: choose it when the pool is made"
static const sr__param lunar_params[] = {
	{"continuous", 0.0, SR__PK_BOOL, P_CONTINUOUS, SR_ENV_PARAM_CREATE,
	 "it chooses the action space: choose it when the pool is made"},
	{"gravity", -10.0, SR__PK_RAW, P_GRAVITY, SR_ENV_PARAM_CREATE, LL_NOTE},
	{"enable_wind", 0.0, SR__PK_BOOL, P_WIND, SR_ENV_PARAM_CREATE, LL_NOTE},
	{"wind_power", 15.0, SR__PK_RAW, P_WIND_POWER, SR_ENV_PARAM_CREATE, LL_NOTE},
	{"turbulence_power", 1.5, SR__PK_RAW, P_TURBULENCE, SR_ENV_PARAM_CREATE, LL_NOTE},
};
#undef LL_NOTE

const sr__params sr__lunar_params = {lunar_params, sizeof(lunar_params) / sizeof(lunar_params[0])};

const sr_env_spec sr__env_lunarlander = {
	.abi_version = SR_ENV_ABI_VERSION,
	.spec_size = sizeof(sr_env_spec),
	.id = "LunarLander-v3",
	.name = "lunarlander",
	.state_size = 8,
	.max_episode_steps = 1000,
	.obs_ndim = 1,
	.obs_shape = {8},
	.obs_dim = 8,
	.obs_low = obs_low,
	.obs_high = obs_high,
	.act_kind = SR_SPACE_DISCRETE,
	.act_n = 4,
	.act_dim = 1,
	.act_low = nullptr,
	.act_high = nullptr,
	.n_phys = 0,
	.reserved0 = 0,
	.params = {0, 0, 0xc024000000000000ull /* -10.0 */, 0x402e000000000000ull /* 15.0 */,
		   0x3ff8000000000000ull /* 1.5 */, 0, 0, 0},
	.seed = ll_seed,
	.reset = ll_reset,
	.step = ll_step,
	.observe = ll_observe,
	.get_phys = nullptr,
	.set_phys = nullptr,
	.flags = SR_ENV_F_OPAQUE,
	.save_max = save_bound(4),
	.check_state = ll_check_state,
	.create = ll_create,
	.destroy = ll_destroy,
	.save = ll_save,
	.load = ll_load,
	.obs_dtype = SR_DTYPE_FLOAT32,
	.obs_kind = SR_SPACE_BOX,
	.obs_low64 = nullptr,
	.obs_high64 = nullptr,
};

const sr_env_spec sr__env_lunarlander_continuous = {
	.abi_version = SR_ENV_ABI_VERSION,
	.spec_size = sizeof(sr_env_spec),
	.id = "LunarLanderContinuous-v3",
	.name = "lunarlander_continuous",
	.state_size = 8,
	.max_episode_steps = 1000,
	.obs_ndim = 1,
	.obs_shape = {8},
	.obs_dim = 8,
	.obs_low = obs_low,
	.obs_high = obs_high,
	.act_kind = SR_SPACE_BOX,
	.act_n = 0,
	.act_dim = 2,
	.act_low = act_low,
	.act_high = act_high,
	.n_phys = 0,
	.reserved0 = 0,
	.params = {1, 0, 0xc024000000000000ull, 0x402e000000000000ull, 0x3ff8000000000000ull, 0,
		   0, 0},
	.seed = ll_seed,
	.reset = ll_reset,
	.step = ll_step,
	.observe = ll_observe,
	.get_phys = nullptr,
	.set_phys = nullptr,
	.flags = SR_ENV_F_OPAQUE,
	.save_max = save_bound(8),
	.check_state = ll_check_state,
	.create = ll_create,
	.destroy = ll_destroy,
	.save = ll_save,
	.load = ll_load,
	.obs_dtype = SR_DTYPE_FLOAT32,
	.obs_kind = SR_SPACE_BOX,
	.obs_low64 = nullptr,
	.obs_high64 = nullptr,
};

/* "continuous=1,gravity=-10,enable_wind=0,wind_power=15,turbulence_power=1.5,
 * rng=stepring|numpy". continuous switches the action space (and the id). */
int sr__lunar_configure(sr_env_spec *spec, const char *params)
{
	sr_env_spec s = *spec;
	const char *id = spec->id;
	int err = parse_params(id, params, [&](const char *k, const char *v) -> int {
		bool b = false;
		double d = 0;
		int e;
		if (!strcmp(k, "continuous")) {
			if ((e = parse_bool(id, k, v, &b)))
				return e;
			const sr_env_spec &base = b ? sr__env_lunarlander_continuous : sr__env_lunarlander;
			uint64_t keep[8];
			memcpy(keep, s.params, sizeof(keep));
			s = base;
			memcpy(s.params, keep, sizeof(keep));
			s.params[P_CONTINUOUS] = b;
		} else if (!strcmp(k, "enable_wind")) {
			if ((e = parse_bool(id, k, v, &b)))
				return e;
			s.params[P_WIND] = b;
		} else if (!strcmp(k, "gravity")) {
			if ((e = parse_double(id, k, v, &d)))
				return e;
			if (!(d > -12.0 && d < 0.0))
				return sr__errorf(-EINVAL, "env '%s': gravity %g must be in (-12, 0)",
						  id, d);
			s.params[P_GRAVITY] = dbits(d);
		} else if (!strcmp(k, "wind_power")) {
			if ((e = parse_double(id, k, v, &d)))
				return e;
			s.params[P_WIND_POWER] = dbits(d);
		} else if (!strcmp(k, "turbulence_power")) {
			if ((e = parse_double(id, k, v, &d)))
				return e;
			s.params[P_TURBULENCE] = dbits(d);
		} else if (!strcmp(k, "rng")) {
			if (strcmp(v, "numpy") && strcmp(v, "stepring"))
				return sr__errorf(-EINVAL, "env '%s': rng='%s' (stepring or numpy)",
						  id, v);
			s.params[P_NUMPY] = !strcmp(v, "numpy");
		} else {
			return sr__errorf(-EINVAL,
					  "env '%s': unknown parameter '%s' (continuous, gravity, "
					  "enable_wind, wind_power, turbulence_power, rng)",
					  id, k);
		}
		return 0;
	});
	if (err)
		return err;
	*spec = s;
	return 0;
}

} // extern "C"
