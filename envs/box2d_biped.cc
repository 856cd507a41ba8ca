/*
 * BipedalWalker-v3 (Gymnasium 1.3.0, normal terrain) on Box2D 2.4.1,
 * behind the C env ABI (opaque state, ABI v2).
 *
 * Gymnasium's env, rebuilt from its description: 200 terrain points of
 * grass (a damped random walk around H/4 after a flat start pad, with the
 * counter draws that make the next step flat), one static body per edge
 * (friction 2.5), the cloud draws (render-only, but they consume the RNG
 * before the initial force), the hull (5-vertex polygon, density 5) pushed
 * by a random horizontal force, two legs of an upper and a lower segment
 * on motorized, limited revolute joints (Revolute23, box2d_common.h: solved
 * as Gymnasium's Box2D 2.3 solves them), a contact listener (hull contact
 * = game over, lower-leg contact flags), 10 lidar rays that see terrain
 * only, the shaping reward (130 * x / SCALE - 5 |angle|, minus the motor
 * cost), and termination on falling (-100), leaving to the left (-100) or
 * reaching the end. Each reset builds a new world (Gymnasium reuses one,
 * so its results depend on the world's history; its reference statistics
 * were made with a fresh env per episode, which this matches). Reset ends
 * with one zero-action step. Hardcore terrain is not implemented.
 *
 * Parameters: rng (stepring | numpy).
 */
#include <box2d/box2d.h>

#include "box2d_common.h"

using namespace sr_b2;

namespace {

const double FPS = 50, SCALE = 30.0;
const double MOTORS_TORQUE = 80, SPEED_HIP = 4, SPEED_KNEE = 6;
const double LIDAR_RANGE = 160 / SCALE, INITIAL_RANDOM = 5;
const double HULL_POLY[5][2] = {{-30, 9}, {6, 9}, {34, 1}, {34, -8}, {-30, -8}};
const double LEG_DOWN = -8 / SCALE, LEG_W = 8 / SCALE, LEG_H = 34 / SCALE;
const double VIEWPORT_W = 600, VIEWPORT_H = 400;
const double TERRAIN_STEP = 14 / SCALE;
const int TERRAIN_LENGTH = 200, TERRAIN_GRASS = 10, TERRAIN_STARTPAD = 20;
const double TERRAIN_HEIGHT = VIEWPORT_H / SCALE / 4;
const double FRICTION = 2.5;

const uint32_t MAGIC = 0x57425253; /* "SRBW" */

struct Biped;

class Listener : public b2ContactListener {
public:
	Biped *env = nullptr;
	void BeginContact(b2Contact *c) override;
	void EndContact(b2Contact *c) override;
};

class Lidar : public b2RayCastCallback {
public:
	float fraction = 1.0f;
	float ReportFixture(b2Fixture *f, const b2Vec2 &point, const b2Vec2 &normal,
			    float frac) override
	{
		if ((f->GetFilterData().categoryBits & 1) == 0)
			return -1;
		fraction = frac;
		return frac;
	}
};

struct Biped : Instance {
	b2Body *hull = nullptr, *legs[4] = {};
	b2RevoluteJoint *joints[4] = {};
	bool contact[4] = {};
	Listener listener;
	double prev_shaping = 0;
	float lidar[10] = {};
	bool game_over = false, has_prev = false;
	Rev23State jst[4]; /* the joints' solver state (Revolute23) */
};

void Listener::BeginContact(b2Contact *c)
{
	b2Body *a = c->GetFixtureA()->GetBody(), *b = c->GetFixtureB()->GetBody();

	if (a == env->hull || b == env->hull)
		env->game_over = true;
	for (int i = 1; i < 4; i += 2)
		if (a == env->legs[i] || b == env->legs[i])
			env->contact[i] = true;
}

void Listener::EndContact(b2Contact *c)
{
	b2Body *a = c->GetFixtureA()->GetBody(), *b = c->GetFixtureB()->GetBody();

	for (int i = 1; i < 4; i += 2)
		if (a == env->legs[i] || b == env->legs[i])
			env->contact[i] = false;
}

void drop_world(Biped *w)
{
	delete w->world;
	w->world = nullptr;
	w->hull = nullptr;
	for (int i = 0; i < 4; i++) {
		w->legs[i] = nullptr;
		w->joints[i] = nullptr;
	}
}

inline double sign(double x)
{
	return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
}

/* The observation in double, as Gymnasium's state list (lidar from the
 * last step's rays). */
void state_of(const Biped *w, double s[24])
{
	b2Vec2 vel = w->hull->GetLinearVelocity();

	s[0] = (double)w->hull->GetAngle();
	s[1] = 2.0 * (double)w->hull->GetAngularVelocity() / FPS;
	s[2] = 0.3 * (double)vel.x * (VIEWPORT_W / SCALE) / FPS;
	s[3] = 0.3 * (double)vel.y * (VIEWPORT_H / SCALE) / FPS;
	for (int leg = 0; leg < 2; leg++) {
		const b2RevoluteJoint *hip = w->joints[2 * leg], *knee = w->joints[2 * leg + 1];
		double *o = s + 4 + 5 * leg;
		o[0] = (double)hip->GetJointAngle();
		o[1] = (double)hip->GetJointSpeed() / SPEED_HIP;
		o[2] = (double)knee->GetJointAngle() + 1.0;
		o[3] = (double)knee->GetJointSpeed() / SPEED_KNEE;
		o[4] = w->contact[2 * leg + 1] ? 1.0 : 0.0;
	}
	for (int i = 0; i < 10; i++)
		s[14 + i] = (double)w->lidar[i];
}

void do_step(Biped *w, const float *a, float *obs, double *reward, uint8_t *terminated)
{
	static const double speed[4] = {SPEED_HIP, SPEED_KNEE, SPEED_HIP, SPEED_KNEE};

	for (int j = 0; j < 4; j++) {
		double mag = std::fmin(std::fmax(std::fabs((double)a[j]), 0.0), 1.0);
		w->joints[j]->SetMotorSpeed((float)(speed[j] * sign((double)a[j])));
		w->joints[j]->SetMaxMotorTorque((float)(MOTORS_TORQUE * mag));
	}
	world_step(w->world);

	b2Vec2 pos = w->hull->GetPosition();
	for (int i = 0; i < 10; i++) {
		Lidar cb;
		b2Vec2 p2((float)((double)pos.x + std::sin(1.5 * i / 10.0) * LIDAR_RANGE),
			  (float)((double)pos.y - std::cos(1.5 * i / 10.0) * LIDAR_RANGE));
		w->world->RayCast(&cb, pos, p2);
		w->lidar[i] = cb.fraction;
	}
	double s[24];
	state_of(w, s);
	double shaping = 130 * (double)pos.x / SCALE;
	shaping -= 5.0 * std::fabs(s[0]);
	double r = 0;
	if (w->has_prev)
		r = shaping - w->prev_shaping;
	w->prev_shaping = shaping;
	w->has_prev = true;
	for (int j = 0; j < 4; j++)
		r -= 0.00035 * MOTORS_TORQUE *
		     (double)std::fmin(std::fmax(std::fabs(a[j]), 0.0f), 1.0f);
	bool term = false;
	if (w->game_over || pos.x < 0) {
		r = -100;
		term = true;
	}
	if ((double)pos.x > (TERRAIN_LENGTH - TERRAIN_GRASS) * TERRAIN_STEP)
		term = true;
	for (int i = 0; i < 24; i++)
		obs[i] = (float)s[i];
	*reward = r;
	*terminated = term;
}

/* The terrain heights (normal mode), drawing what Gymnasium draws. */
void terrain(Biped *w, double ty[TERRAIN_LENGTH])
{
	double velocity = 0.0, y = TERRAIN_HEIGHT;
	int64_t counter = TERRAIN_STARTPAD;
	bool oneshot = false;

	for (int i = 0; i < TERRAIN_LENGTH; i++) {
		if (!oneshot) { /* always grass */
			velocity = 0.8 * velocity + 0.01 * sign(TERRAIN_HEIGHT - y);
			if (i > TERRAIN_STARTPAD)
				velocity += w->rng.uniform(-1, 1) / SCALE;
			y += velocity;
		}
		oneshot = false;
		ty[i] = y;
		counter -= 1;
		if (counter == 0) {
			counter = w->rng.integers(TERRAIN_GRASS / 2, TERRAIN_GRASS);
			oneshot = true;
		}
	}
}

b2Body *dyn_box(Biped *w, double x, double y, double angle, double hw, double hh)
{
	b2BodyDef bd;
	bd.type = b2_dynamicBody;
	bd.position.Set((float)x, (float)y);
	bd.angle = (float)angle;
	b2Body *b = w->world->CreateBody(&bd);
	b2PolygonShape box;
	box.SetAsBox((float)hw, (float)hh);
	b2FixtureDef fd;
	fd.shape = &box;
	fd.density = 1.0f;
	fd.restitution = 0.0f;
	fd.filter.categoryBits = 0x0020;
	fd.filter.maskBits = 0x001;
	b->CreateFixture(&fd);
	return b;
}

b2RevoluteJoint *joint(Biped *w, int k, b2Body *a, b2Body *b, double ay, double by,
		       double speed, double lo, double hi)
{
	b2RevoluteJointDef rjd;
	rjd.bodyA = a;
	rjd.bodyB = b;
	rjd.localAnchorA.Set(0, (float)ay);
	rjd.localAnchorB.Set(0, (float)by);
	/* pybox2d's joint def sets the reference angle from the bodies when it
	 * is given both and no referenceAngle: the joint angle starts at 0. */
	rjd.referenceAngle = b->GetAngle() - a->GetAngle();
	rjd.enableMotor = true;
	rjd.enableLimit = true;
	rjd.maxMotorTorque = (float)MOTORS_TORQUE;
	rjd.motorSpeed = (float)speed;
	rjd.lowerAngle = (float)lo;
	rjd.upperAngle = (float)hi;
	rjd.userData.pointer = (uintptr_t)&w->jst[k];
	b2RevoluteJoint *j = (b2RevoluteJoint *)w->world->CreateJoint(&rjd);
	Revolute23::adopt(j, &w->jst[k]);
	return j;
}

void do_reset(Biped *w, float *obs)
{
	w->rng_start = w->rng;
	w->log.clear();
	drop_world(w);
	w->world = new b2World(b2Vec2(0.0f, -10.0f));
	w->world->SetContactListener(&w->listener);
	w->game_over = false;
	w->has_prev = false;
	for (int i = 0; i < 4; i++)
		w->contact[i] = false;

	double ty[TERRAIN_LENGTH];
	terrain(w, ty);
	for (int i = 0; i < TERRAIN_LENGTH - 1; i++) {
		b2BodyDef bd;
		b2Body *t = w->world->CreateBody(&bd);
		b2EdgeShape e;
		e.SetTwoSided(b2Vec2((float)(i * TERRAIN_STEP), (float)ty[i]),
			      b2Vec2((float)((i + 1) * TERRAIN_STEP), (float)ty[i + 1]));
		b2FixtureDef fd;
		fd.shape = &e;
		fd.friction = (float)FRICTION;
		fd.filter.categoryBits = 0x0001;
		t->CreateFixture(&fd);
	}
	/* Clouds: render-only, but they take 10 x 11 draws before the force. */
	for (int c = 0; c < TERRAIN_LENGTH / 20; c++)
		for (int k = 0; k < 11; k++)
			(void)w->rng.uniform(0, k ? 5 * TERRAIN_STEP : TERRAIN_LENGTH);

	double init_x = TERRAIN_STEP * TERRAIN_STARTPAD / 2;
	double init_y = TERRAIN_HEIGHT + 2 * LEG_H;
	b2BodyDef bd;
	bd.type = b2_dynamicBody;
	bd.position.Set((float)init_x, (float)init_y);
	w->hull = w->world->CreateBody(&bd);
	b2Vec2 v[5];
	for (int i = 0; i < 5; i++)
		v[i].Set((float)(HULL_POLY[i][0] / SCALE), (float)(HULL_POLY[i][1] / SCALE));
	b2PolygonShape poly;
	poly.Set(v, 5);
	b2FixtureDef fd;
	fd.shape = &poly;
	fd.density = 5.0f;
	fd.friction = 0.1f;
	fd.filter.categoryBits = 0x0020;
	fd.filter.maskBits = 0x001;
	fd.restitution = 0.0f;
	w->hull->CreateFixture(&fd);
	double fx = w->rng.uniform(-INITIAL_RANDOM, INITIAL_RANDOM);
	w->hull->ApplyForceToCenter(b2Vec2((float)fx, 0.0f), true);

	for (int k = 0; k < 2; k++) {
		double i = k ? 1.0 : -1.0;
		b2Body *leg = dyn_box(w, init_x, init_y - LEG_H / 2 - LEG_DOWN, i * 0.05, LEG_W / 2,
				      LEG_H / 2);
		w->legs[2 * k] = leg;
		w->joints[2 * k] = joint(w, 2 * k, w->hull, leg, LEG_DOWN, LEG_H / 2, i, -0.8, 1.1);
		b2Body *lower = dyn_box(w, init_x, init_y - LEG_H * 3 / 2 - LEG_DOWN, i * 0.05,
					0.8 * LEG_W / 2, LEG_H / 2);
		w->legs[2 * k + 1] = lower;
		w->joints[2 * k + 1] = joint(w, 2 * k + 1, leg, lower, -LEG_H / 2, LEG_H / 2, 1, -1.6, -0.1);
	}
	static const float zero[4] = {0, 0, 0, 0};
	double r;
	uint8_t t;
	do_step(w, zero, obs, &r, &t);
}

/* ---- the C ABI -------------------------------------------------------------- */

int bw_create(const sr_env_spec *spec, void *state)
{
	return create_instance<Biped>(spec, state);
}

void bw_destroy(const sr_env_spec *spec, void *state)
{
	destroy_instance<Biped>(state);
}

void bw_seed(const sr_env_spec *spec, void *states, size_t n, uint64_t seed, uint64_t first)
{
	seed_instances<Biped>(spec, states, n, seed, first);
}

void bw_reset(const sr_env_spec *spec, void *states, size_t n, float *obs)
{
	for (size_t i = 0; i < n; i++)
		do_reset(inst<Biped>((char *)states + i * spec->state_size), obs + 24 * i);
}

void bw_step(const sr_env_spec *spec, void *states, size_t n, const void *actions, float *obs,
	     double *reward, uint8_t *terminated)
{
	const float *a = (const float *)actions;

	for (size_t i = 0; i < n; i++) {
		Biped *w = inst<Biped>((char *)states + i * spec->state_size);
		if (!w->world) {
			memset(obs + 24 * i, 0, 24 * sizeof(float));
			reward[i] = 0;
			terminated[i] = 1;
			continue;
		}
		w->log.push(a + 4 * i, 16, spec->max_episode_steps);
		do_step(w, a + 4 * i, obs + 24 * i, reward + i, terminated + i);
	}
}

void bw_observe(const sr_env_spec *spec, const void *state, float *obs)
{
	const Biped *w = inst<Biped>(state);
	double s[24];

	if (!w->world) {
		memset(obs, 0, 24 * sizeof(float));
		return;
	}
	state_of(w, s);
	for (int i = 0; i < 24; i++)
		obs[i] = (float)s[i];
}

int bw_check_state(const sr_env_spec *spec, const void *state)
{
	const Biped *w = inst<Biped>(state);
	return check_instance(w, w ? w->hull : nullptr);
}

int bw_save(const sr_env_spec *spec, const void *state, void *buf, size_t cap, size_t *len)
{
	float o[24];
	bw_observe(spec, state, o);
	return save_instance(spec, inst<Biped>(state), MAGIC, o, 24, buf, cap, len);
}

int bw_load(const sr_env_spec *spec, void *state, const void *buf, size_t len)
{
	Biped *w = inst<Biped>(state);
	double r;
	uint8_t t;
	return load_instance(
		spec, w, MAGIC, 24, buf, len, [&] { drop_world(w); },
		[&](float *obs) { do_reset(w, obs); },
		[&](const void *act, float *obs) {
			float a[4]; /* the saved bytes need not be aligned */
			memcpy(a, act, sizeof(a));
			do_step(w, a, obs, &r, &t);
		});
}

const float P = (float)M_PI;
const float obs_low[24] = {-P, -5, -5, -5, -P, -5, -P, -5, -0.0f, -P, -5, -P, -5, -0.0f,
			   -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
const float obs_high[24] = {P, 5, 5, 5, P, 5, P, 5, 5, P, 5, P, 5, 5,
			    1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
const float act_low[4] = {-1, -1, -1, -1};
const float act_high[4] = {1, 1, 1, 1};

} // namespace

extern "C" {

static const sr__param biped_params[] = {
	{"hardcore", 0.0, SR__PK_FIXED, -1, 0,
	 "hardcore terrain is not implemented (normal terrain only)"},
};

const sr__params sr__biped_params = {biped_params, 1};

const sr_env_spec sr__env_bipedalwalker = {
	.abi_version = SR_ENV_ABI_VERSION,
	.spec_size = sizeof(sr_env_spec),
	.id = "BipedalWalker-v3",
	.name = "bipedalwalker",
	.state_size = 8,
	.max_episode_steps = 1600,
	.obs_ndim = 1,
	.obs_shape = {24},
	.obs_dim = 24,
	.obs_low = obs_low,
	.obs_high = obs_high,
	.act_kind = SR_SPACE_BOX,
	.act_n = 0,
	.act_dim = 4,
	.act_low = act_low,
	.act_high = act_high,
	.n_phys = 0,
	.reserved0 = 0,
	.params = {0, 0, 0, 0, 0, 0, 0, 0},
	.seed = bw_seed,
	.reset = bw_reset,
	.step = bw_step,
	.observe = bw_observe,
	.get_phys = nullptr,
	.set_phys = nullptr,
	.flags = SR_ENV_F_OPAQUE,
	.save_max = (uint32_t)sizeof(SaveHeader) + 1600u * 16u,
	.check_state = bw_check_state,
	.create = bw_create,
	.destroy = bw_destroy,
	.save = bw_save,
	.load = bw_load,
	.obs_dtype = SR_DTYPE_FLOAT32,
	.obs_kind = SR_SPACE_BOX,
	.obs_low64 = nullptr,
	.obs_high64 = nullptr,
};

/* "rng=stepring|numpy" */
int sr__biped_configure(sr_env_spec *spec, const char *params)
{
	sr_env_spec s = *spec;
	const char *id = spec->id;
	int err = parse_params(id, params, [&](const char *k, const char *v) -> int {
		if (!strcmp(k, "rng")) {
			if (strcmp(v, "numpy") && strcmp(v, "stepring"))
				return sr__errorf(-EINVAL, "env '%s': rng='%s' (stepring or numpy)",
						  id, v);
			s.params[P_NUMPY] = !strcmp(v, "numpy");
			return 0;
		}
		if (!strcmp(k, "hardcore"))
			return sr__errorf(-EINVAL,
					  "env '%s': hardcore terrain is not implemented (normal "
					  "terrain only)",
					  id);
		return sr__errorf(-EINVAL, "env '%s': unknown parameter '%s' (rng)", id, k);
	});
	if (err)
		return err;
	*spec = s;
	return 0;
}

} // extern "C"
