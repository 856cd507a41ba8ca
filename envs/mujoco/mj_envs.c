/*
 * Gymnasium 1.3.0's MuJoCo envs, v5 and v4, on libmujoco 2.2.2: HalfCheetah,
 * Hopper, Walker2d, Ant, Humanoid, HumanoidStandup, InvertedPendulum,
 * InvertedDoublePendulum, Reacher, Swimmer and Pusher, written from
 * Gymnasium's classes with their arithmetic (see docs/envs.md):
 *
 *  - reset: the noise in Gymnasium's draw order from the instance RNG
 *    (NumPy's PCG64 streams by default, so instance i seeded with s starts
 *    as Gymnasium's env after reset(seed=s + i)), then Gymnasium's
 *    set_state: qpos, qvel, mj_forward (no mj_rnePostConstraint: cfrc_ext
 *    is zero in a reset observation);
 *  - step: the quantities "before" read first, ctrl = the float32 action
 *    widened (MuJoCo clamps it inside), mj_step x frame_skip, one
 *    mj_rnePostConstraint, then observation, reward, termination and the
 *    info terms;
 *  - the control cost of the action in float32 with NumPy's pairwise
 *    summation, costs of mjData in double with the same order, x**2 as
 *    glibc pow, np.clip's NaN rule, norms summed left to right.
 *
 * An instance (opaque state, ABI v2: the state bytes hold a pointer) owns
 * one mjData, made on the thread that creates the instance (mj_makeData
 * clears the whole buffer there: its pages are first touched on that
 * thread's node), and shares its env type's mjModel. It keeps the inputs
 * of the last MuJoCo operation that changed it (the state before the
 * reset's mj_forward, or before the step's last mj_step): save writes them
 * with the state now, load runs that one operation again and checks that
 * it lands on the saved state, so everything a later step or observe reads
 * (xpos, xipos, cfrc_ext, the warm start...) is restored to the bit.
 *
 * A reset does not clear the mjData buffer (mj_resetData writes all of it:
 * 0.4 ms a reset): it writes what the next mj_forward and the
 * observations read that mj_forward does not write itself: time, ctrl,
 * act, qacc_warmstart, the applied forces, cacc/cfrc_int/cfrc_ext and the
 * warning counters (then qpos and qvel). tests/test_mujoco.c proves it
 * bit for bit against mj_resetData, also on a buffer filled with garbage.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mj_internal.h"

/* ---- the instance RNG -------------------------------------------------------- */

struct rng {
	uint32_t numpy; /* 1: NumPy's PCG64 (Gymnasium's np_random); 0: sr_rng */
	uint32_t pad;
	sr_rng x;
	sr_np_pcg64 pcg;
};

static uint64_t rng_next(void *p)
{
	struct rng *r = p;
	return r->numpy ? sr_np_next64(&r->pcg) : sr_rng_next(&r->x);
}

/* Generator.uniform(lo, hi). */
static double uniform(struct rng *r, double lo, double hi)
{
	return lo + (hi - lo) * ((double)(rng_next(r) >> 11) * 0x1.0p-53);
}

/* Generator.standard_normal(): NumPy's ziggurat on either word source. */
static double normal(struct rng *r)
{
	return sr_np_normal_from(rng_next, r);
}

static bool rng_ok(const struct rng *r)
{
	return r->numpy ? (r->pcg.inc & 1) != 0 : sr__rng_ok(&r->x);
}

/* ---- NumPy's arithmetic --------------------------------------------------------- */

/* np.sum of a float32 array: pairwise, every partial sum rounded to float32. */
static float pairwise32(const float *a, size_t n)
{
	if (n < 8) {
		float s = 0.f;
		for (size_t i = 0; i < n; i++)
			s += a[i];
		return s;
	}
	if (n <= 128) {
		float r[8];
		size_t i;
		for (int j = 0; j < 8; j++)
			r[j] = a[j];
		for (i = 8; i < n - n % 8; i += 8)
			for (int j = 0; j < 8; j++)
				r[j] += a[i + j];
		float s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
		for (; i < n; i++)
			s += a[i];
		return s;
	}
	size_t n2 = n / 2;
	n2 -= n2 % 8;
	return pairwise32(a, n2) + pairwise32(a + n2, n - n2);
}

static double pairwise64(const double *a, size_t n)
{
	if (n < 8) {
		double s = 0.;
		for (size_t i = 0; i < n; i++)
			s += a[i];
		return s;
	}
	if (n <= 128) {
		double r[8];
		size_t i;
		for (int j = 0; j < 8; j++)
			r[j] = a[j];
		for (i = 8; i < n - n % 8; i += 8)
			for (int j = 0; j < 8; j++)
				r[j] += a[i + j];
		double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
		for (; i < n; i++)
			s += a[i];
		return s;
	}
	size_t n2 = n / 2;
	n2 -= n2 % 8;
	return pairwise64(a, n2) + pairwise64(a + n2, n - n2);
}

#define MAX_SUMSQ 512 /* Humanoid-v4's cfrc_ext: 84 */

/* np.sum(np.square(a)) of the float32 action: float32 squares and sum. */
static float sumsq32(const float *a, size_t n)
{
	float sq[MAX_SUMSQ];
	for (size_t i = 0; i < n; i++)
		sq[i] = a[i] * a[i];
	return pairwise32(sq, n);
}

/* np.sum(np.square(x)) of float64 values. */
static double sumsq64(const double *x, size_t n)
{
	double sq[MAX_SUMSQ];
	for (size_t i = 0; i < n; i++)
		sq[i] = x[i] * x[i];
	return pairwise64(sq, n);
}

/* np.clip(x, lo, hi): a NaN stays NaN. */
static inline double np_clip(double x, double lo, double hi)
{
	if (isnan(x))
		return x;
	double t = x > lo ? x : lo;
	return t < hi ? t : hi;
}

/* np.linalg.norm of a short vector: the dot product left to right. */
static inline double norm2(double a, double b)
{
	return sqrt(a * a + b * b);
}

static inline double norm3(const double *v)
{
	return sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
}

/* ---- the env types ----------------------------------------------------------- */

static const char *const i_hc5[] = {"x_position", "x_velocity", "reward_forward", "reward_ctrl"};
static const char *const i_hc4[] = {"x_position", "x_velocity", "reward_run", "reward_ctrl"};
static const char *const i_hop5[] = {"x_position",     "z_distance_from_origin",
				     "x_velocity",     "reward_forward",
				     "reward_ctrl",    "reward_survive"};
static const char *const i_hop4[] = {"x_position", "x_velocity"};
static const char *const i_ant5[] = {"x_position",     "y_position",  "distance_from_origin",
				     "x_velocity",     "y_velocity",  "reward_forward",
				     "reward_ctrl",    "reward_contact", "reward_survive"};
static const char *const i_ant4[] = {"reward_forward", "reward_ctrl",   "reward_survive",
				     "x_position",     "y_position",    "distance_from_origin",
				     "x_velocity",     "y_velocity",    "forward_reward"};
static const char *const i_hum5[] = {"x_position",	     "y_position",
				     "tendon_length_0",      "tendon_length_1",
				     "tendon_velocity_0",    "tendon_velocity_1",
				     "distance_from_origin", "x_velocity",
				     "y_velocity",	     "reward_survive",
				     "reward_forward",	     "reward_ctrl",
				     "reward_contact"};
static const char *const i_hum4[] = {"reward_linvel", "reward_quadctrl", "reward_alive",
				     "x_position",    "y_position",      "distance_from_origin",
				     "x_velocity",    "y_velocity",      "forward_reward"};
static const char *const i_std5[] = {"x_position",	  "y_position",	       "z_distance_from_origin",
				     "tendon_length_0",	  "tendon_length_1",   "tendon_velocity_0",
				     "tendon_velocity_1", "reward_linup",      "reward_quadctrl",
				     "reward_impact"};
static const char *const i_std4[] = {"reward_linup", "reward_quadctrl", "reward_impact"};
static const char *const i_ip5[] = {"reward_survive"};
static const char *const i_idp5[] = {"reward_survive", "distance_penalty", "velocity_penalty"};
static const char *const i_reach[] = {"reward_dist", "reward_ctrl"};
static const char *const i_sw5[] = {"x_position", "y_position",     "distance_from_origin",
				    "x_velocity", "y_velocity",     "reward_forward",
				    "reward_ctrl"};
static const char *const i_sw4[] = {"reward_fwd",	"reward_ctrl", "x_position",
				    "y_position",	"distance_from_origin", "x_velocity",
				    "y_velocity",	"forward_reward"};
static const char *const i_push5[] = {"reward_dist", "reward_ctrl", "reward_near"};
static const char *const i_push4[] = {"reward_dist", "reward_ctrl"};

static const uint8_t ri_012[] = {0, 1, 2, 3, 4, 5, 6};

#define INFO(names) .n_info = sizeof(names) / sizeof(names[0]), .info_names = names
#define RESET_INFO(n) .n_reset_info = (n), .reset_info = ri_012
#define COMMON_V5 (KB(K_FS) | KB(K_XML) | KB(K_RNG))

/* Model files, by name (their index is looked up when the defs are). */
enum { X_ANT, X_HC, X_HOP, X_HUM, X_STD, X_IDP, X_IP, X_PUSH4, X_PUSH5, X_REACH, X_SWIM,
       X_WALK4, X_WALK5, X_COUNT };
static const char *const xml_names[X_COUNT] = {
	"ant.xml",	 "half_cheetah.xml", "hopper.xml",   "humanoid.xml",
	"humanoidstandup.xml", "inverted_double_pendulum.xml", "inverted_pendulum.xml",
	"pusher.xml",	 "pusher_v5.xml",    "reacher.xml",  "swimmer.xml",
	"walker2d.xml",	 "walker2d_v5.xml"};

const struct mj_def sr__mj_defs[] = {
	{.id = "HalfCheetah-v5", .name = "halfcheetah", .kind = MJ_HALFCHEETAH, .version = 5,
	 .xml = X_HC, .frame_skip = 5, .flags = F_EXCLUDE,
	 .keys = KB(K_FWD) | KB(K_CTRL) | KB(K_NOISE) | KB(K_EXCL) | COMMON_V5,
	 .num = {[S_FWD] = 1.0, [S_CTRL] = 0.1, [S_NOISE] = 0.1},
	 .nq = 9, .nv = 9, .nu = 6, .nbody = 8, INFO(i_hc5), RESET_INFO(1)},
	{.id = "HalfCheetah-v4", .name = "halfcheetah_v4", .kind = MJ_HALFCHEETAH, .version = 4,
	 .xml = X_HC, .frame_skip = 5, .flags = F_EXCLUDE,
	 .keys = KB(K_FWD) | KB(K_CTRL) | KB(K_NOISE) | KB(K_EXCL) | KB(K_RNG),
	 .num = {[S_FWD] = 1.0, [S_CTRL] = 0.1, [S_NOISE] = 0.1},
	 .nq = 9, .nv = 9, .nu = 6, .nbody = 8, INFO(i_hc4)},
	{.id = "Hopper-v5", .name = "hopper", .kind = MJ_HOPPER, .version = 5, .xml = X_HOP,
	 .frame_skip = 4, .flags = F_EXCLUDE | F_TERMINATE,
	 .keys = KB(K_FWD) | KB(K_CTRL) | KB(K_HEALTHY) | KB(K_TERM) | KB(K_STATE) | KB(K_Z) |
		 KB(K_ANGLE) | KB(K_NOISE) | KB(K_EXCL) | COMMON_V5,
	 .num = {[S_FWD] = 1.0, [S_CTRL] = 1e-3, [S_HEALTHY] = 1.0, [S_NOISE] = 5e-3,
		 [S_STATE_LO] = -100.0, [S_STATE_HI] = 100.0, [S_Z_LO] = 0.7,
		 [S_Z_HI] = INFINITY, [S_ANGLE_LO] = -0.2, [S_ANGLE_HI] = 0.2},
	 .nq = 6, .nv = 6, .nu = 3, .nbody = 5, INFO(i_hop5), RESET_INFO(2)},
	{.id = "Hopper-v4", .name = "hopper_v4", .kind = MJ_HOPPER, .version = 4, .xml = X_HOP,
	 .frame_skip = 4, .flags = F_EXCLUDE | F_TERMINATE,
	 .keys = KB(K_FWD) | KB(K_CTRL) | KB(K_HEALTHY) | KB(K_TERM) | KB(K_STATE) | KB(K_Z) |
		 KB(K_ANGLE) | KB(K_NOISE) | KB(K_EXCL) | KB(K_RNG),
	 .num = {[S_FWD] = 1.0, [S_CTRL] = 1e-3, [S_HEALTHY] = 1.0, [S_NOISE] = 5e-3,
		 [S_STATE_LO] = -100.0, [S_STATE_HI] = 100.0, [S_Z_LO] = 0.7,
		 [S_Z_HI] = INFINITY, [S_ANGLE_LO] = -0.2, [S_ANGLE_HI] = 0.2},
	 .nq = 6, .nv = 6, .nu = 3, .nbody = 5, INFO(i_hop4)},
	{.id = "Walker2d-v5", .name = "walker2d", .kind = MJ_WALKER2D, .version = 5,
	 .xml = X_WALK5, .frame_skip = 4, .flags = F_EXCLUDE | F_TERMINATE,
	 .keys = KB(K_FWD) | KB(K_CTRL) | KB(K_HEALTHY) | KB(K_TERM) | KB(K_Z) | KB(K_ANGLE) |
		 KB(K_NOISE) | KB(K_EXCL) | COMMON_V5,
	 .num = {[S_FWD] = 1.0, [S_CTRL] = 1e-3, [S_HEALTHY] = 1.0, [S_NOISE] = 5e-3,
		 [S_Z_LO] = 0.8, [S_Z_HI] = 2.0, [S_ANGLE_LO] = -1.0, [S_ANGLE_HI] = 1.0},
	 .nq = 9, .nv = 9, .nu = 6, .nbody = 8, INFO(i_hop5), RESET_INFO(2)},
	{.id = "Walker2d-v4", .name = "walker2d_v4", .kind = MJ_WALKER2D, .version = 4,
	 .xml = X_WALK4, .frame_skip = 4, .flags = F_EXCLUDE | F_TERMINATE,
	 .keys = KB(K_FWD) | KB(K_CTRL) | KB(K_HEALTHY) | KB(K_TERM) | KB(K_Z) | KB(K_ANGLE) |
		 KB(K_NOISE) | KB(K_EXCL) | KB(K_RNG),
	 .num = {[S_FWD] = 1.0, [S_CTRL] = 1e-3, [S_HEALTHY] = 1.0, [S_NOISE] = 5e-3,
		 [S_Z_LO] = 0.8, [S_Z_HI] = 2.0, [S_ANGLE_LO] = -1.0, [S_ANGLE_HI] = 1.0},
	 .nq = 9, .nv = 9, .nu = 6, .nbody = 8, INFO(i_hop4)},
	{.id = "Ant-v5", .name = "ant", .kind = MJ_ANT, .version = 5, .xml = X_ANT,
	 .frame_skip = 5, .flags = F_EXCLUDE | F_TERMINATE | F_CFRC, .main_body = 1,
	 .keys = KB(K_FWD) | KB(K_CTRL) | KB(K_CONTACT) | KB(K_HEALTHY) | KB(K_BODY) |
		 KB(K_TERM) | KB(K_Z) | KB(K_CF) | KB(K_NOISE) | KB(K_EXCL) | KB(K_CFRC) |
		 COMMON_V5,
	 .num = {[S_FWD] = 1.0, [S_CTRL] = 0.5, [S_CONTACT] = 5e-4, [S_HEALTHY] = 1.0,
		 [S_Z_LO] = 0.2, [S_Z_HI] = 1.0, [S_CF_LO] = -1.0, [S_CF_HI] = 1.0,
		 [S_NOISE] = 0.1},
	 .nq = 15, .nv = 14, .nu = 8, .nbody = 14, INFO(i_ant5), RESET_INFO(3)},
	{.id = "Ant-v4", .name = "ant_v4", .kind = MJ_ANT, .version = 4, .xml = X_ANT,
	 .frame_skip = 5, .flags = F_EXCLUDE | F_TERMINATE, .main_body = 1,
	 .keys = KB(K_XML) | KB(K_CTRL) | KB(K_UCF) | KB(K_CONTACT) | KB(K_HEALTHY) |
		 KB(K_TERM) | KB(K_Z) | KB(K_CF) | KB(K_NOISE) | KB(K_EXCL) | KB(K_RNG),
	 .num = {[S_FWD] = 1.0, [S_CTRL] = 0.5, [S_CONTACT] = 5e-4, [S_HEALTHY] = 1.0,
		 [S_Z_LO] = 0.2, [S_Z_HI] = 1.0, [S_CF_LO] = -1.0, [S_CF_HI] = 1.0,
		 [S_NOISE] = 0.1},
	 .nq = 15, .nv = 14, .nu = 8, .nbody = 14, INFO(i_ant4)},
	{.id = "Humanoid-v5", .name = "humanoid", .kind = MJ_HUMANOID, .version = 5,
	 .xml = X_HUM, .frame_skip = 5,
	 .flags = F_EXCLUDE | F_TERMINATE | F_CINERT | F_CVEL | F_QFRC | F_CFRC,
	 .keys = KB(K_FWD) | KB(K_CTRL) | KB(K_CONTACT) | KB(K_CC) | KB(K_HEALTHY) |
		 KB(K_TERM) | KB(K_Z) | KB(K_NOISE) | KB(K_EXCL) | KB(K_CINERT) | KB(K_CVEL) |
		 KB(K_QFRC) | KB(K_CFRC) | COMMON_V5,
	 .num = {[S_FWD] = 1.25, [S_CTRL] = 0.1, [S_CONTACT] = 5e-7, [S_CC_LO] = -INFINITY,
		 [S_CC_HI] = 10.0, [S_HEALTHY] = 5.0, [S_Z_LO] = 1.0, [S_Z_HI] = 2.0,
		 [S_NOISE] = 1e-2},
	 .nq = 24, .nv = 23, .nu = 17, .nbody = 14, INFO(i_hum5), RESET_INFO(7)},
	{.id = "Humanoid-v4", .name = "humanoid_v4", .kind = MJ_HUMANOID, .version = 4,
	 .xml = X_HUM, .frame_skip = 5, .flags = F_EXCLUDE | F_TERMINATE,
	 .keys = KB(K_FWD) | KB(K_CTRL) | KB(K_HEALTHY) | KB(K_TERM) | KB(K_Z) | KB(K_NOISE) |
		 KB(K_EXCL) | KB(K_RNG),
	 .num = {[S_FWD] = 1.25, [S_CTRL] = 0.1, [S_HEALTHY] = 5.0, [S_Z_LO] = 1.0,
		 [S_Z_HI] = 2.0, [S_NOISE] = 1e-2},
	 .nq = 24, .nv = 23, .nu = 17, .nbody = 14, INFO(i_hum4)},
	{.id = "HumanoidStandup-v5", .name = "humanoidstandup", .kind = MJ_STANDUP,
	 .version = 5, .xml = X_STD, .frame_skip = 5,
	 .flags = F_EXCLUDE | F_CINERT | F_CVEL | F_QFRC | F_CFRC,
	 .keys = KB(K_UPH) | KB(K_CTRL) | KB(K_IMPACT) | KB(K_IC) | KB(K_NOISE) | KB(K_EXCL) |
		 KB(K_CINERT) | KB(K_CVEL) | KB(K_QFRC) | KB(K_CFRC) | COMMON_V5,
	 .num = {[S_UPH] = 1.0, [S_CTRL] = 0.1, [S_CONTACT] = 0.5e-6, [S_CC_LO] = -INFINITY,
		 [S_CC_HI] = 10.0, [S_NOISE] = 1e-2},
	 .nq = 24, .nv = 23, .nu = 17, .nbody = 14, INFO(i_std5), RESET_INFO(7)},
	{.id = "HumanoidStandup-v4", .name = "humanoidstandup_v4", .kind = MJ_STANDUP,
	 .version = 4, .xml = X_STD, .frame_skip = 5, .flags = F_EXCLUDE, .keys = KB(K_RNG),
	 .num = {[S_CTRL] = 0.1, [S_CONTACT] = 5e-7, [S_CC_HI] = 10.0, [S_NOISE] = 0.01},
	 .nq = 24, .nv = 23, .nu = 17, .nbody = 14, INFO(i_std4)},
	{.id = "InvertedPendulum-v5", .name = "invertedpendulum", .kind = MJ_IPEND,
	 .version = 5, .xml = X_IP, .frame_skip = 2, .keys = KB(K_NOISE) | COMMON_V5,
	 .num = {[S_NOISE] = 0.01}, .nq = 2, .nv = 2, .nu = 1, .nbody = 3, INFO(i_ip5)},
	{.id = "InvertedPendulum-v4", .name = "invertedpendulum_v4", .kind = MJ_IPEND,
	 .version = 4, .xml = X_IP, .frame_skip = 2, .keys = KB(K_RNG),
	 .num = {[S_NOISE] = 0.01}, .nq = 2, .nv = 2, .nu = 1, .nbody = 3},
	{.id = "InvertedDoublePendulum-v5", .name = "inverteddoublependulum", .kind = MJ_IDPEND,
	 .version = 5, .xml = X_IDP, .frame_skip = 5,
	 .keys = KB(K_HEALTHY) | KB(K_NOISE) | COMMON_V5,
	 .num = {[S_HEALTHY] = 10.0, [S_NOISE] = 0.1}, .nq = 3, .nv = 3, .nu = 1, .nbody = 4,
	 INFO(i_idp5)},
	{.id = "InvertedDoublePendulum-v4", .name = "inverteddoublependulum_v4",
	 .kind = MJ_IDPEND, .version = 4, .xml = X_IDP, .frame_skip = 5, .keys = KB(K_RNG),
	 .num = {[S_HEALTHY] = 10.0, [S_NOISE] = 0.1}, .nq = 3, .nv = 3, .nu = 1, .nbody = 4},
	{.id = "Reacher-v5", .name = "reacher", .kind = MJ_REACHER, .version = 5, .xml = X_REACH,
	 .frame_skip = 2, .keys = KB(K_DIST) | KB(K_RCTRL) | COMMON_V5,
	 .num = {[S_DIST] = 1.0, [S_CTRL] = 1.0}, .nq = 4, .nv = 4, .nu = 2, .nbody = 5,
	 INFO(i_reach)},
	{.id = "Reacher-v4", .name = "reacher_v4", .kind = MJ_REACHER, .version = 4,
	 .xml = X_REACH, .frame_skip = 2, .keys = KB(K_RNG),
	 .num = {[S_DIST] = 1.0, [S_CTRL] = 1.0}, .nq = 4, .nv = 4, .nu = 2, .nbody = 5,
	 INFO(i_reach)},
	{.id = "Swimmer-v5", .name = "swimmer", .kind = MJ_SWIMMER, .version = 5, .xml = X_SWIM,
	 .frame_skip = 4, .flags = F_EXCLUDE,
	 .keys = KB(K_FWD) | KB(K_CTRL) | KB(K_NOISE) | KB(K_EXCL) | COMMON_V5,
	 .num = {[S_FWD] = 1.0, [S_CTRL] = 1e-4, [S_NOISE] = 0.1}, .nq = 5, .nv = 5, .nu = 2,
	 .nbody = 4, INFO(i_sw5), RESET_INFO(3)},
	{.id = "Swimmer-v4", .name = "swimmer_v4", .kind = MJ_SWIMMER, .version = 4,
	 .xml = X_SWIM, .frame_skip = 4, .flags = F_EXCLUDE,
	 .keys = KB(K_FWD) | KB(K_CTRL) | KB(K_NOISE) | KB(K_EXCL) | KB(K_RNG),
	 .num = {[S_FWD] = 1.0, [S_CTRL] = 1e-4, [S_NOISE] = 0.1}, .nq = 5, .nv = 5, .nu = 2,
	 .nbody = 4, INFO(i_sw4)},
	{.id = "Pusher-v5", .name = "pusher", .kind = MJ_PUSHER, .version = 5, .xml = X_PUSH5,
	 .frame_skip = 5, .keys = KB(K_NEAR) | KB(K_DIST) | KB(K_RCTRL) | COMMON_V5,
	 .num = {[S_NEAR] = 0.5, [S_DIST] = 1.0, [S_CTRL] = 0.1}, .nq = 11, .nv = 11, .nu = 7,
	 .nbody = 13, INFO(i_push5)},
	{.id = "Pusher-v4", .name = "pusher_v4", .kind = MJ_PUSHER, .version = 4, .xml = X_PUSH4,
	 .frame_skip = 5, .keys = KB(K_RNG),
	 .num = {[S_NEAR] = 0.5, [S_DIST] = 1.0, [S_CTRL] = 0.1}, .nq = 11, .nv = 11, .nu = 7,
	 .nbody = 13, INFO(i_push4)},
};
const unsigned sr__mj_ndefs = sizeof(sr__mj_defs) / sizeof(sr__mj_defs[0]);

const struct mj_def *sr__mj_def_of(const sr_env_spec *spec)
{
	for (unsigned i = 0; i < sr__mj_ndefs; i++)
		if (!strcmp(spec->name, sr__mj_defs[i].name))
			return &sr__mj_defs[i];
	return NULL;
}

bool sr__is_mujoco(const sr_env_spec *spec)
{
	return spec && spec->name && sr__mj_def_of(spec) != NULL;
}

/* ---- instances ----------------------------------------------------------------- */

enum { PH_NONE, PH_RESET, PH_STEP };

struct inst {
	mjData *d;
	const mjModel *m;
	const struct mj_model *mm;
	const struct mj_def *def;
	struct mj_cfg cfg;
	double dt;          /* timestep * frame_skip, as Gymnasium's dt */
	struct rng rng;
	uint32_t phase;     /* what the last operation was (PH_*) */
	uint32_t npre;      /* doubles of pre[] */
	double info[MJ_MAX_INFO];
	/* The inputs of the last operation: qpos, qvel, act, qacc_warmstart,
	 * time, ctrl (before the reset's mj_forward or the step's last
	 * mj_step). */
	double pre[];
};

#define SAVE_MAGIC 0x4a4d5253u /* "SRMJ" */
#define SAVE_VERSION 1u

struct save_hdr {
	uint32_t magic, version;
	uint64_t model_hash;  /* the model file's text */
	uint64_t spec_hash;   /* the env type's id and parameters */
	uint32_t phase, nq, nv, na, nu, n_info;
	struct rng rng;
};

/* save: the header, the state now (cur_len), the inputs of the last
 * operation (pre_len), the info terms. */
#define SAVE_BOUND(nq, nv, nu)                                                             \
	((uint32_t)sizeof(struct save_hdr) +                                               \
	 8u * (2u * ((nq) + 2u * (nv) + 1u) + (nu) + MJ_MAX_INFO))

static struct inst *inst_of(const void *state)
{
	struct inst *e;
	memcpy(&e, state, sizeof(e));
	return e;
}

static uint32_t pre_len(const mjModel *m)
{
	return (uint32_t)(m->nq + 2 * m->nv + m->na + 1 + m->nu);
}

/* The state a step reads, without ctrl: qpos, qvel, act, qacc_warmstart, time. */
static uint32_t cur_len(const mjModel *m)
{
	return (uint32_t)(m->nq + 2 * m->nv + m->na + 1);
}

static void get_cur(const mjModel *m, const mjData *d, double *o)
{
	memcpy(o, d->qpos, sizeof(double) * (size_t)m->nq);
	o += m->nq;
	memcpy(o, d->qvel, sizeof(double) * (size_t)m->nv);
	o += m->nv;
	memcpy(o, d->act, sizeof(double) * (size_t)m->na);
	o += m->na;
	memcpy(o, d->qacc_warmstart, sizeof(double) * (size_t)m->nv);
	o += m->nv;
	o[0] = d->time;
}

static void keep_pre(struct inst *e)
{
	get_cur(e->m, e->d, e->pre);
	memcpy(e->pre + cur_len(e->m), e->d->ctrl, sizeof(double) * (size_t)e->m->nu);
}

static void put_pre(struct inst *e)
{
	const mjModel *m = e->m;
	mjData *d = e->d;
	const double *p = e->pre;

	memcpy(d->qpos, p, sizeof(double) * (size_t)m->nq);
	p += m->nq;
	memcpy(d->qvel, p, sizeof(double) * (size_t)m->nv);
	p += m->nv;
	memcpy(d->act, p, sizeof(double) * (size_t)m->na);
	p += m->na;
	memcpy(d->qacc_warmstart, p, sizeof(double) * (size_t)m->nv);
	p += m->nv;
	d->time = p[0];
	memcpy(d->ctrl, p + 1, sizeof(double) * (size_t)m->nu);
}

/* The model is the one the spec was written for: sizes, action bounds. */
static int check_model(const sr_env_spec *spec, const struct mj_def *def, const mjModel *m)
{
	bool ok = m->nq == (int)def->nq && m->nv == (int)def->nv && m->nu == (int)def->nu &&
		  m->nbody == (int)def->nbody && m->na == 0 && m->nu == (int)spec->act_dim &&
		  (uint32_t)(m->nq + m->nv) == spec->n_phys &&
		  spec->save_max >= SAVE_BOUND((uint32_t)m->nq, (uint32_t)m->nv, (uint32_t)m->nu);
	for (int i = 0; ok && i < m->nu; i++)
		ok = (float)m->actuator_ctrlrange[2 * i] == spec->act_low[i] &&
		     (float)m->actuator_ctrlrange[2 * i + 1] == spec->act_high[i];
	if (!ok)
		return sr__errorf(-EINVAL, "env '%s': its model's sizes or action bounds are not "
				  "the ones the env was written for", spec->id);
	return 0;
}

static int mj_create(const sr_env_spec *spec, void *state)
{
	const struct mj_def *def = sr__mj_def_of(spec);
	const struct mj_model *mm;
	struct inst *e = NULL;
	struct mj_cfg cfg;
	int err;

	if (!def)
		return -EINVAL;
	sr__mj_cfg(spec, &cfg);
	err = sr__mj_model(cfg.xml, &mm);
	if (err)
		return err;
	err = check_model(spec, def, mm->m);
	if (err)
		return err;
	if (posix_memalign((void **)&e, 64, sizeof(*e) + sizeof(double) * pre_len(mm->m)))
		return -ENOMEM;
	memset(e, 0, sizeof(*e));
	e->m = mm->m;
	e->mm = mm;
	e->def = def;
	e->cfg = cfg;
	e->dt = mm->m->opt.timestep * (double)cfg.frame_skip;
	e->npre = pre_len(mm->m);
	e->d = mj_makeData(mm->m); /* clears its buffer: first touch on this thread */
	if (!e->d) {
		free(e);
		return -ENOMEM;
	}
	memset(e->pre, 0, sizeof(double) * e->npre);
	memcpy(state, &e, sizeof(e));
	return 0;
}

static void mj_destroy(const sr_env_spec *spec, void *state)
{
	struct inst *e = inst_of(state);

	if (!e)
		return;
	mj_deleteData(e->d);
	free(e);
	memset(state, 0, sizeof(e));
}

static void mj_seed(const sr_env_spec *spec, void *states, size_t n, uint64_t seed,
		    uint64_t first)
{
	for (size_t i = 0; i < n; i++) {
		struct inst *e = inst_of((char *)states + i * spec->state_size);
		memset(&e->rng, 0, sizeof(e->rng));
		e->rng.numpy = !(e->cfg.flags & F_STEPRING_RNG);
		if (e->rng.numpy)
			sr_np_seed(&e->rng.pcg, seed + first + i);
		else
			sr_rng_seed(&e->rng.x, seed, first + i);
	}
}

/* ---- observations ------------------------------------------------------------- */

static double *put(double *o, const double *src, int n)
{
	memcpy(o, src, sizeof(double) * (size_t)(n > 0 ? n : 0));
	return o + (n > 0 ? n : 0);
}

static double *put_clip(double *o, const double *src, int n, double lo, double hi)
{
	for (int i = 0; i < n; i++)
		*o++ = np_clip(src[i], lo, hi);
	return o;
}

static void observe(const struct inst *e, double *o)
{
	const struct mj_def *def = e->def;
	const mjModel *m = e->m;
	const mjData *d = e->d;
	uint32_t f = e->cfg.flags;
	int ex = (f & F_EXCLUDE) ? 1 : 0, nb = m->nbody;
	const double *cf = e->cfg.num;

	switch (def->kind) {
	case MJ_HALFCHEETAH:
		o = put(o, d->qpos + ex, m->nq - ex);
		put(o, d->qvel, m->nv);
		break;
	case MJ_HOPPER:
	case MJ_WALKER2D:
		o = put(o, d->qpos + ex, m->nq - ex);
		put_clip(o, d->qvel, m->nv, -10, 10);
		break;
	case MJ_ANT:
		o = put(o, d->qpos + 2 * ex, m->nq - 2 * ex);
		o = put(o, d->qvel, m->nv);
		if (def->version == 5 && (f & F_CFRC))
			put_clip(o, d->cfrc_ext + 6, 6 * (nb - 1), cf[S_CF_LO], cf[S_CF_HI]);
		else if (def->version == 4 && (f & F_CONTACT_FORCES))
			put_clip(o, d->cfrc_ext, 6 * nb, cf[S_CF_LO], cf[S_CF_HI]);
		break;
	case MJ_HUMANOID:
	case MJ_STANDUP:
		o = put(o, d->qpos + 2 * ex, m->nq - 2 * ex);
		o = put(o, d->qvel, m->nv);
		if (def->version == 4) {
			o = put(o, d->cinert, 10 * nb);
			o = put(o, d->cvel, 6 * nb);
			o = put(o, d->qfrc_actuator, m->nv);
			put(o, d->cfrc_ext, 6 * nb);
			break;
		}
		if (f & F_CINERT)
			o = put(o, d->cinert + 10, 10 * (nb - 1));
		if (f & F_CVEL)
			o = put(o, d->cvel + 6, 6 * (nb - 1));
		if (f & F_QFRC)
			o = put(o, d->qfrc_actuator + 6, m->nv - 6);
		if (f & F_CFRC)
			put(o, d->cfrc_ext + 6, 6 * (nb - 1));
		break;
	case MJ_IPEND:
		o = put(o, d->qpos, m->nq);
		put(o, d->qvel, m->nv);
		break;
	case MJ_IDPEND:
		*o++ = d->qpos[0];
		for (int i = 1; i < m->nq; i++)
			*o++ = sin(d->qpos[i]);
		for (int i = 1; i < m->nq; i++)
			*o++ = cos(d->qpos[i]);
		o = put_clip(o, d->qvel, m->nv, -10, 10);
		put_clip(o, d->qfrc_constraint, def->version == 4 ? m->nv : 1, -10, 10);
		break;
	case MJ_REACHER: {
		const double *ft = d->xpos + 3 * e->mm->body_fingertip;
		const double *tg = d->xpos + 3 * e->mm->body_target;
		*o++ = cos(d->qpos[0]);
		*o++ = cos(d->qpos[1]);
		*o++ = sin(d->qpos[0]);
		*o++ = sin(d->qpos[1]);
		o = put(o, d->qpos + 2, m->nq - 2);
		o = put(o, d->qvel, 2);
		for (int j = 0; j < (def->version == 4 ? 3 : 2); j++)
			*o++ = ft[j] - tg[j];
		break;
	}
	case MJ_SWIMMER:
		o = put(o, d->qpos + 2 * ex, m->nq - 2 * ex);
		put(o, d->qvel, m->nv);
		break;
	case MJ_PUSHER:
		o = put(o, d->qpos, 7);
		o = put(o, d->qvel, 7);
		o = put(o, d->xpos + 3 * e->mm->body_tips_arm, 3);
		o = put(o, d->xpos + 3 * e->mm->body_object, 3);
		put(o, d->xpos + 3 * e->mm->body_goal, 3);
		break;
	}
}

/* ---- reset -------------------------------------------------------------------- */

/* The reset info terms: the first n_reset_info names, from the state now. */
static void reset_info(struct inst *e)
{
	const mjData *d = e->d;
	const double *q0 = e->m->qpos0;
	double *in = e->info;

	for (int i = 0; i < MJ_MAX_INFO; i++)
		in[i] = NAN;
	switch (e->def->kind) {
	case MJ_HALFCHEETAH:
		if (e->def->version == 5)
			in[0] = d->qpos[0];
		break;
	case MJ_HOPPER:
	case MJ_WALKER2D:
		if (e->def->version == 5) {
			in[0] = d->qpos[0];
			in[1] = d->qpos[1] - q0[1];
		}
		break;
	case MJ_ANT:
	case MJ_SWIMMER:
		if (e->def->version == 5) {
			in[0] = d->qpos[0];
			in[1] = d->qpos[1];
			in[2] = norm2(d->qpos[0], d->qpos[1]);
		}
		break;
	case MJ_HUMANOID:
		if (e->def->version == 5) {
			in[0] = d->qpos[0];
			in[1] = d->qpos[1];
			in[2] = d->ten_length[0];
			in[3] = d->ten_length[1];
			in[4] = d->ten_velocity[0];
			in[5] = d->ten_velocity[1];
			in[6] = norm2(d->qpos[0], d->qpos[1]);
		}
		break;
	case MJ_STANDUP:
		if (e->def->version == 5) {
			in[0] = d->qpos[0];
			in[1] = d->qpos[1];
			in[2] = d->qpos[2] - q0[2];
			in[3] = d->ten_length[0];
			in[4] = d->ten_length[1];
			in[5] = d->ten_velocity[0];
			in[6] = d->ten_velocity[1];
		}
		break;
	default:
		break;
	}
}

/* What a step reads that mj_forward does not write, and the observations
 * read that only mj_rnePostConstraint writes: set as mj_resetData leaves
 * them (qpos and qvel are written next). */
static void clear_for_reset(const mjModel *m, mjData *d)
{
	d->time = 0;
	mju_zero(d->ctrl, m->nu);
	mju_zero(d->act, m->na);
	mju_zero(d->qacc_warmstart, m->nv);
	mju_zero(d->qfrc_applied, m->nv);
	mju_zero(d->xfrc_applied, 6 * m->nbody);
	mju_zero(d->cacc, 6 * m->nbody);
	mju_zero(d->cfrc_int, 6 * m->nbody);
	mju_zero(d->cfrc_ext, 6 * m->nbody);
	/* The world body's rows, which MuJoCo never writes after mj_makeData
	 * (v4's observations include them): zero, as made. */
	mju_zero(d->cinert, 10);
	mju_zero(d->cvel, 6);
	memset(d->warning, 0, sizeof(d->warning));
}

/* Gymnasium's reset_model noise, in its draw order, into d->qpos/qvel. */
static void draw_state(struct inst *e)
{
	const mjModel *m = e->m;
	mjData *d = e->d;
	const double *q0 = m->qpos0;
	double s = e->cfg.num[S_NOISE];
	int nq = m->nq, nv = m->nv;

	switch (e->def->kind) {
	case MJ_HALFCHEETAH:
	case MJ_ANT:
		for (int i = 0; i < nq; i++)
			d->qpos[i] = q0[i] + uniform(&e->rng, -s, s);
		for (int i = 0; i < nv; i++)
			d->qvel[i] = 0.0 + s * normal(&e->rng);
		break;
	case MJ_IDPEND:
		for (int i = 0; i < nq; i++)
			d->qpos[i] = q0[i] + uniform(&e->rng, -s, s);
		for (int i = 0; i < nv; i++)
			d->qvel[i] = 0.0 + normal(&e->rng) * s;
		break;
	case MJ_REACHER: {
		double g0, g1;
		for (int i = 0; i < nq; i++)
			d->qpos[i] = uniform(&e->rng, -0.1, 0.1) + q0[i];
		do {
			g0 = uniform(&e->rng, -0.2, 0.2);
			g1 = uniform(&e->rng, -0.2, 0.2);
		} while (!(norm2(g0, g1) < 0.2));
		d->qpos[nq - 2] = g0;
		d->qpos[nq - 1] = g1;
		for (int i = 0; i < nv; i++)
			d->qvel[i] = 0.0 + uniform(&e->rng, -0.005, 0.005);
		d->qvel[nv - 2] = d->qvel[nv - 1] = 0;
		break;
	}
	case MJ_PUSHER: {
		double c0, c1;
		do {
			c0 = uniform(&e->rng, -0.3, 0);
			c1 = uniform(&e->rng, -0.2, 0.2);
		} while (!(norm2(c0, c1) > 0.17));
		memcpy(d->qpos, q0, sizeof(double) * (size_t)nq);
		d->qpos[nq - 4] = c0;
		d->qpos[nq - 3] = c1;
		d->qpos[nq - 2] = d->qpos[nq - 1] = 0;
		for (int i = 0; i < nv; i++)
			d->qvel[i] = 0.0 + uniform(&e->rng, -0.005, 0.005);
		for (int i = nv - 4; i < nv; i++)
			d->qvel[i] = 0;
		break;
	}
	default: /* Hopper, Walker2d, Humanoid(Standup), InvertedPendulum, Swimmer */
		for (int i = 0; i < nq; i++)
			d->qpos[i] = q0[i] + uniform(&e->rng, -s, s);
		for (int i = 0; i < nv; i++)
			d->qvel[i] = 0.0 + uniform(&e->rng, -s, s);
		break;
	}
}

/* After qpos and qvel are set: Gymnasium's set_state (mj_forward), the
 * inputs kept for save. */
static void finish_reset(struct inst *e)
{
	keep_pre(e);
	mj_forward(e->m, e->d);
	e->phase = PH_RESET;
	reset_info(e);
}

enum { RESET_FAST, RESET_FULL, RESET_GARBAGE };

static void reset_one(struct inst *e, double *obs, int how)
{
	if (how == RESET_FULL) {
		mj_resetData(e->m, e->d);
	} else {
		if (how == RESET_GARBAGE) /* every byte of the buffer is stale */
			memset(e->d->buffer, 0x7f, (size_t)e->d->nbuffer);
		clear_for_reset(e->m, e->d);
	}
	draw_state(e);
	finish_reset(e);
	observe(e, obs);
}

static void mj_reset(const sr_env_spec *spec, void *states, size_t n, float *obs)
{
	double *o = (double *)(void *)obs;

	for (size_t i = 0; i < n; i++)
		reset_one(inst_of((char *)states + i * spec->state_size), o + i * spec->obs_dim,
			  RESET_FAST);
}

/* ---- step ----------------------------------------------------------------------- */

/* Per-thread timing of the mj_step x frame_skip loops (bench env). */
static _Thread_local bool timing;
static _Thread_local uint64_t timed_ns, timed_steps;

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void sr__mujoco_physics_timing(int on, uint64_t *ns, uint64_t *steps)
{
	if (ns)
		*ns = timed_ns;
	if (steps)
		*steps = timed_steps;
	timing = on != 0;
	timed_ns = timed_steps = 0;
}

/* Humanoid's mass_center: np.einsum("b,bj->j") body by body from 0, over
 * body_mass.sum(). */
static void mass_center(const struct inst *e, double c[2])
{
	const mjModel *m = e->m;
	const double *x = e->d->xipos;
	double num[3] = {0, 0, 0};

	for (int b = 0; b < m->nbody; b++)
		for (int j = 0; j < 3; j++)
			num[j] += m->body_mass[b] * x[3 * b + j];
	c[0] = num[0] / e->mm->mass_sum;
	c[1] = num[1] / e->mm->mass_sum;
}

/* Reacher-v4 and Pusher-v4 reward the state before the step. */
static double reward_v4_before(const struct inst *e, const float *a, double *info)
{
	const mjData *d = e->d;
	const struct mj_model *mm = e->mm;
	double ctrl = -(double)sumsq32(a, (size_t)e->m->nu);

	if (e->def->kind == MJ_REACHER) {
		double v[3];
		for (int j = 0; j < 3; j++)
			v[j] = d->xpos[3 * mm->body_fingertip + j] - d->xpos[3 * mm->body_target + j];
		double rd = -norm3(v);
		info[0] = rd;
		info[1] = ctrl;
		return rd + ctrl;
	}
	double v1[3], v2[3];
	for (int j = 0; j < 3; j++) {
		v1[j] = d->xpos[3 * mm->body_object + j] - d->xpos[3 * mm->body_tips_arm + j];
		v2[j] = d->xpos[3 * mm->body_object + j] - d->xpos[3 * mm->body_goal + j];
	}
	double near = -norm3(v1), dist = -norm3(v2);
	info[0] = dist;
	info[1] = ctrl;
	return (dist + 0.1 * ctrl) + 0.5 * near;
}

struct before {
	double x, y;   /* x (and y) position before the step */
	double reward; /* v4 Reacher/Pusher */
};

static void read_before(struct inst *e, const float *a, struct before *b)
{
	const mjData *d = e->d;
	double c[2];

	switch (e->def->kind) {
	case MJ_HALFCHEETAH:
	case MJ_HOPPER:
	case MJ_WALKER2D:
	case MJ_SWIMMER:
		b->x = d->qpos[0];
		b->y = d->qpos[1];
		break;
	case MJ_ANT: {
		int body = e->def->version == 5 ? (int)e->cfg.main_body : e->mm->body_torso;
		b->x = d->xpos[3 * body];
		b->y = d->xpos[3 * body + 1];
		break;
	}
	case MJ_HUMANOID:
		mass_center(e, c);
		b->x = c[0];
		b->y = c[1];
		break;
	case MJ_REACHER:
	case MJ_PUSHER:
		if (e->def->version == 4)
			b->reward = reward_v4_before(e, a, e->info);
		break;
	default:
		break;
	}
}

/* Reward, termination and info terms after the step. */
static double reward_after(struct inst *e, const float *a, const struct before *b,
			   uint8_t *term)
{
	const struct mj_def *def = e->def;
	const mjModel *m = e->m;
	const mjData *d = e->d;
	const double *w = e->cfg.num;
	const double *q = d->qpos;
	double *in = e->info, dt = e->dt, r = 0;
	size_t nu = (size_t)m->nu;
	bool v5 = def->version == 5, terminate = (e->cfg.flags & F_TERMINATE) != 0, healthy;
	double two = sr__pow_two;

	*term = 0;
	switch (def->kind) {
	case MJ_HALFCHEETAH: {
		double xv = (q[0] - b->x) / dt, fwd = w[S_FWD] * xv;
		double ctrl = w[S_CTRL] * (double)sumsq32(a, nu);
		in[0] = q[0];
		in[1] = xv;
		in[2] = fwd;
		in[3] = -ctrl;
		return fwd - ctrl;
	}
	case MJ_HOPPER:
	case MJ_WALKER2D: {
		double z = q[1], ang = q[2];
		if (def->kind == MJ_HOPPER) {
			healthy = true;
			for (int i = 2; i < m->nq; i++)
				healthy &= w[S_STATE_LO] < q[i] && q[i] < w[S_STATE_HI];
			for (int i = 0; i < m->nv; i++)
				healthy &= w[S_STATE_LO] < d->qvel[i] && d->qvel[i] < w[S_STATE_HI];
		} else {
			healthy = true;
		}
		healthy = healthy && w[S_Z_LO] < z && z < w[S_Z_HI] && w[S_ANGLE_LO] < ang &&
			  ang < w[S_ANGLE_HI];
		double xv = (q[0] - b->x) / dt, fwd = w[S_FWD] * xv;
		double h = (double)(v5 ? healthy : (healthy || terminate)) * w[S_HEALTHY];
		double ctrl = w[S_CTRL] * (double)sumsq32(a, nu);
		*term = !healthy && terminate;
		in[0] = q[0];
		if (v5) {
			in[1] = q[1] - m->qpos0[1];
			in[2] = xv;
			in[3] = fwd;
			in[4] = -ctrl;
			in[5] = h;
		} else {
			in[1] = xv;
		}
		return (fwd + h) - ctrl;
	}
	case MJ_ANT: {
		int body = v5 ? (int)e->cfg.main_body : e->mm->body_torso;
		double xa = d->xpos[3 * body], ya = d->xpos[3 * body + 1];
		double xv = (xa - b->x) / dt, yv = (ya - b->y) / dt;
		healthy = true;
		for (int i = 0; i < m->nq; i++)
			healthy &= isfinite(q[i]) != 0;
		for (int i = 0; i < m->nv; i++)
			healthy &= isfinite(d->qvel[i]) != 0;
		healthy = healthy && w[S_Z_LO] <= q[2] && q[2] <= w[S_Z_HI];
		double h = (double)(v5 ? healthy : (healthy || terminate)) * w[S_HEALTHY];
		double ctrl = w[S_CTRL] * (double)sumsq32(a, nu), contact = 0;
		bool use_contact = v5 || (e->cfg.flags & F_CONTACT_FORCES);
		if (use_contact) {
			double cf[6 * 64];
			int n = 6 * m->nbody;
			for (int i = 0; i < n; i++)
				cf[i] = np_clip(d->cfrc_ext[i], w[S_CF_LO], w[S_CF_HI]);
			contact = w[S_CONTACT] * sumsq64(cf, (size_t)n);
		}
		*term = !healthy && terminate;
		if (v5) {
			double fwd = xv * w[S_FWD];
			in[0] = q[0];
			in[1] = q[1];
			in[2] = norm2(q[0], q[1]);
			in[3] = xv;
			in[4] = yv;
			in[5] = fwd;
			in[6] = -ctrl;
			in[7] = -contact;
			in[8] = h;
			return (fwd + h) - (ctrl + contact);
		}
		in[0] = xv;
		in[1] = use_contact ? -contact : -ctrl;
		in[2] = h;
		in[3] = xa;
		in[4] = ya;
		in[5] = norm2(xa, ya);
		in[6] = xv;
		in[7] = yv;
		in[8] = xv;
		return use_contact ? (xv + h) - (ctrl + contact) : (xv + h) - ctrl;
	}
	case MJ_HUMANOID: {
		double c[2];
		mass_center(e, c);
		double xv = (c[0] - b->x) / dt, yv = (c[1] - b->y) / dt, fwd = w[S_FWD] * xv;
		healthy = w[S_Z_LO] < q[2] && q[2] < w[S_Z_HI];
		double h = (double)(v5 ? healthy : (healthy || terminate)) * w[S_HEALTHY];
		double ctrl = w[S_CTRL] * sumsq64(d->ctrl, nu);
		*term = !healthy && terminate;
		if (!v5) {
			in[0] = fwd;
			in[1] = -ctrl;
			in[2] = h;
			in[3] = c[0];
			in[4] = c[1];
			in[5] = norm2(c[0], c[1]);
			in[6] = xv;
			in[7] = yv;
			in[8] = fwd;
			return (fwd + h) - ctrl;
		}
		double contact = np_clip(w[S_CONTACT] * sumsq64(d->cfrc_ext, 6 * (size_t)m->nbody),
					 w[S_CC_LO], w[S_CC_HI]);
		in[0] = q[0];
		in[1] = q[1];
		in[2] = d->ten_length[0];
		in[3] = d->ten_length[1];
		in[4] = d->ten_velocity[0];
		in[5] = d->ten_velocity[1];
		in[6] = norm2(q[0], q[1]);
		in[7] = xv;
		in[8] = yv;
		in[9] = h;
		in[10] = fwd;
		in[11] = -ctrl;
		in[12] = -contact;
		return (fwd + h) - (ctrl + contact);
	}
	case MJ_STANDUP: {
		double uph = (q[2] - 0) / m->opt.timestep; /* uph_cost_weight unused, as Gymnasium's */
		double ctrl = w[S_CTRL] * sumsq64(d->ctrl, nu);
		double impact = w[S_CONTACT] * sumsq64(d->cfrc_ext, 6 * (size_t)m->nbody);
		if (v5) {
			impact = np_clip(impact, w[S_CC_LO], w[S_CC_HI]);
			in[0] = q[0];
			in[1] = q[1];
			in[2] = q[2] - m->qpos0[2];
			in[3] = d->ten_length[0];
			in[4] = d->ten_length[1];
			in[5] = d->ten_velocity[0];
			in[6] = d->ten_velocity[1];
			in[7] = uph;
			in[8] = -ctrl;
			in[9] = -impact;
		} else {
			impact = 10 < impact ? 10.0 : impact; /* Python's min(impact, 10) */
			in[0] = uph;
			in[1] = -ctrl;
			in[2] = -impact;
		}
		return ((uph - ctrl) - impact) + 1;
	}
	case MJ_IPEND: {
		bool fin = true;
		for (int i = 0; i < m->nq; i++)
			fin &= isfinite(q[i]) != 0;
		for (int i = 0; i < m->nv; i++)
			fin &= isfinite(d->qvel[i]) != 0;
		*term = !fin || fabs(q[1]) > 0.2;
		if (!v5)
			return 1.0;
		r = *term ? 0.0 : 1.0;
		in[0] = r;
		return r;
	}
	case MJ_IDPEND: {
		const double *s = d->site_xpos;
		double x = s[0], y = s[2], v1 = d->qvel[1], v2 = d->qvel[2];
		*term = y <= 1;
		double dist = 0.01 * pow(x, two) + pow(y - 2, two);
		double vel = 1e-3 * pow(v1, two) + 5e-3 * pow(v2, two);
		double alive = v5 ? w[S_HEALTHY] * (double)!*term : 10.0;
		if (v5) {
			in[0] = alive;
			in[1] = -dist;
			in[2] = -vel;
		}
		return (alive - dist) - vel;
	}
	case MJ_REACHER: {
		if (!v5)
			return b->reward;
		const struct mj_model *mm = e->mm;
		double v[3];
		for (int j = 0; j < 3; j++)
			v[j] = d->xpos[3 * mm->body_fingertip + j] - d->xpos[3 * mm->body_target + j];
		double rd = -norm3(v) * w[S_DIST];
		double rc = -(double)sumsq32(a, nu) * w[S_CTRL];
		in[0] = rd;
		in[1] = rc;
		return rd + rc;
	}
	case MJ_SWIMMER: {
		double xv = (q[0] - b->x) / dt, yv = (q[1] - b->y) / dt, fwd = w[S_FWD] * xv;
		double ctrl = w[S_CTRL] * (double)sumsq32(a, nu);
		if (v5) {
			in[0] = q[0];
			in[1] = q[1];
			in[2] = norm2(q[0], q[1]);
			in[3] = xv;
			in[4] = yv;
			in[5] = fwd;
			in[6] = -ctrl;
		} else {
			in[0] = fwd;
			in[1] = -ctrl;
			in[2] = q[0];
			in[3] = q[1];
			in[4] = norm2(q[0], q[1]);
			in[5] = xv;
			in[6] = yv;
			in[7] = fwd;
		}
		return fwd - ctrl;
	}
	case MJ_PUSHER: {
		if (!v5)
			return b->reward;
		const struct mj_model *mm = e->mm;
		double v1[3], v2[3];
		for (int j = 0; j < 3; j++) {
			v1[j] = d->xpos[3 * mm->body_object + j] - d->xpos[3 * mm->body_tips_arm + j];
			v2[j] = d->xpos[3 * mm->body_object + j] - d->xpos[3 * mm->body_goal + j];
		}
		double near = -norm3(v1) * w[S_NEAR], dist = -norm3(v2) * w[S_DIST];
		double ctrl = -(double)sumsq32(a, nu) * w[S_CTRL];
		in[0] = dist;
		in[1] = ctrl;
		in[2] = near;
		return (dist + ctrl) + near;
	}
	}
	return r;
}

static void step_one(struct inst *e, const float *a, double *obs, double *reward,
		     uint8_t *term)
{
	const mjModel *m = e->m;
	mjData *d = e->d;
	uint32_t fs = e->cfg.frame_skip;
	struct before b = {0, 0, 0};
	uint64_t t0 = 0;

	for (int i = 0; i < MJ_MAX_INFO; i++)
		e->info[i] = NAN;
	read_before(e, a, &b);
	for (int j = 0; j < m->nu; j++)
		d->ctrl[j] = (double)a[j];
	if (timing)
		t0 = cpu_ns();
	for (uint32_t k = 1; k < fs; k++)
		mj_step(m, d);
	keep_pre(e);
	mj_step(m, d);
	if (timing) {
		timed_ns += cpu_ns() - t0;
		timed_steps++;
	}
	mj_rnePostConstraint(m, d);
	e->phase = PH_STEP;
	*reward = reward_after(e, a, &b, term);
	observe(e, obs);
}

static void mj_step_batch(const sr_env_spec *spec, void *states, size_t n, const void *actions,
			  float *obs, double *reward, uint8_t *terminated)
{
	const float *a = actions;
	double *o = (double *)(void *)obs;

	for (size_t i = 0; i < n; i++)
		step_one(inst_of((char *)states + i * spec->state_size), a + i * spec->act_dim,
			 o + i * spec->obs_dim, reward + i, terminated + i);
}

static void mj_observe(const sr_env_spec *spec, const void *state, float *obs)
{
	observe(inst_of(state), (double *)(void *)obs);
}

/* ---- physical state: qpos and qvel (envcheck, reference replays) --------------- */

static void mj_get_phys(const sr_env_spec *spec, const void *state, double *phys)
{
	const struct inst *e = inst_of(state);

	memcpy(phys, e->d->qpos, sizeof(double) * (size_t)e->m->nq);
	memcpy(phys + e->m->nq, e->d->qvel, sizeof(double) * (size_t)e->m->nv);
}

/* Gymnasium's mj_resetData + set_state(qpos, qvel): a reset to that state. */
static void mj_set_phys(const sr_env_spec *spec, void *state, const double *phys)
{
	struct inst *e = inst_of(state);

	clear_for_reset(e->m, e->d);
	memcpy(e->d->qpos, phys, sizeof(double) * (size_t)e->m->nq);
	memcpy(e->d->qvel, phys + e->m->nq, sizeof(double) * (size_t)e->m->nv);
	finish_reset(e);
}

/* Finite and within MuJoCo's mjMAXVAL (1e10): mj_step resets a state
 * beyond it (with a warning). */
static bool all_finite(const double *x, int n)
{
	for (int i = 0; i < n; i++)
		if (!(fabs(x[i]) <= mjMAXVAL))
			return false;
	return true;
}

static int mj_check_state(const sr_env_spec *spec, const void *state)
{
	const struct inst *e = inst_of(state);

	if (!e || !e->d || !rng_ok(&e->rng))
		return -EINVAL;
	if (!all_finite(e->d->qpos, e->m->nq) || !all_finite(e->d->qvel, e->m->nv) ||
	    !all_finite(e->d->qacc_warmstart, e->m->nv) || !(e->d->time >= 0) ||
	    !isfinite(e->d->time))
		return -EINVAL;
	return 0;
}

/* ---- save / load ----------------------------------------------------------------- */

static uint64_t spec_hash(const sr_env_spec *spec)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const char *c = spec->id; *c; c++)
		h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
	for (int i = 0; i < 8; i++)
		h = (h ^ spec->params[i]) * 0x100000001b3ull;
	return h;
}

static int mj_save(const sr_env_spec *spec, const void *state, void *buf, size_t cap,
		   size_t *len)
{
	const struct inst *e = inst_of(state);
	const mjModel *m = e->m;
	uint32_t nc = cur_len(m), ni = e->def->n_info;
	size_t need = sizeof(struct save_hdr) + 8 * ((size_t)nc + e->npre + ni);
	struct save_hdr h;
	char *p = buf;

	if (cap < need)
		return -ENOSPC;
	memset(&h, 0, sizeof(h));
	h.magic = SAVE_MAGIC;
	h.version = SAVE_VERSION;
	h.model_hash = e->mm->hash;
	h.spec_hash = spec_hash(spec);
	h.phase = e->phase;
	h.nq = (uint32_t)m->nq;
	h.nv = (uint32_t)m->nv;
	h.na = (uint32_t)m->na;
	h.nu = (uint32_t)m->nu;
	h.n_info = ni;
	h.rng = e->rng;
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	get_cur(m, e->d, (double *)(void *)p); /* buf is the runtime's, 8-byte aligned */
	p += 8 * (size_t)nc;
	memcpy(p, e->pre, 8 * (size_t)e->npre);
	p += 8 * (size_t)e->npre;
	memcpy(p, e->info, 8 * (size_t)ni);
	*len = need;
	return 0;
}

static int mj_load(const sr_env_spec *spec, void *state, const void *buf, size_t len)
{
	struct inst *e = inst_of(state);
	const mjModel *m;
	struct save_hdr h;
	const char *p = buf;
	double cur[256], pre[256];

	if (!e || len < sizeof(h))
		return -EINVAL;
	m = e->m;
	memcpy(&h, p, sizeof(h));
	p += sizeof(h);
	uint32_t nc = cur_len(m), ni = e->def->n_info;
	if (h.magic != SAVE_MAGIC || h.version != SAVE_VERSION || h.model_hash != e->mm->hash ||
	    h.spec_hash != spec_hash(spec) || h.phase > PH_STEP || h.nq != (uint32_t)m->nq ||
	    h.nv != (uint32_t)m->nv || h.na != (uint32_t)m->na || h.nu != (uint32_t)m->nu ||
	    h.n_info != ni || h.rng.numpy > 1 || !rng_ok(&h.rng) || e->npre > sizeof(pre) / 8 ||
	    len != sizeof(h) + 8 * ((size_t)nc + e->npre + ni))
		return -EINVAL;
	memcpy(cur, p, 8 * (size_t)nc);
	memcpy(pre, p + 8 * (size_t)nc, 8 * (size_t)e->npre);
	if (!all_finite(cur, (int)nc) || !all_finite(pre, (int)e->npre))
		return -EINVAL; /* nothing changed yet */
	memcpy(e->pre, pre, 8 * (size_t)e->npre);
	e->rng = h.rng;
	if (h.phase == PH_NONE) {
		mj_resetData(m, e->d);
		memset(e->pre, 0, 8 * (size_t)e->npre);
		for (int i = 0; i < MJ_MAX_INFO; i++)
			e->info[i] = NAN;
		e->phase = PH_NONE;
		return 0;
	}
	/* Run the last operation again from its inputs: it must land on the
	 * saved state (else these bytes are not a save of this build's env). */
	clear_for_reset(m, e->d);
	put_pre(e);
	if (h.phase == PH_RESET) {
		mj_forward(m, e->d);
	} else {
		mj_step(m, e->d);
		mj_rnePostConstraint(m, e->d);
	}
	e->phase = h.phase;
	memcpy(e->info, p + 8 * ((size_t)nc + e->npre), 8 * (size_t)ni);
	double now[256];
	get_cur(m, e->d, now);
	return memcmp(now, cur, 8 * (size_t)nc) ? -EINVAL : 0;
}

/* ---- probes of the internals (tools/bench/env_probe.c) -------------------------- */

int sr__mujoco_info(const sr_env_spec *spec, const void *state, const char *const **names,
		    double *values, size_t cap)
{
	const struct mj_def *def = sr__mj_def_of(spec);
	const struct inst *e = state ? inst_of(state) : NULL;

	if (!def)
		return -EINVAL;
	if (names)
		*names = def->info_names;
	for (size_t i = 0; e && values && i < def->n_info && i < cap; i++)
		values[i] = e->info[i];
	return (int)def->n_info;
}

int sr__mujoco_trig(const sr_env_spec *spec, uint32_t *first, uint32_t *count)
{
	const struct mj_def *def = sr__mj_def_of(spec);

	if (!def)
		return -EINVAL;
	*first = *count = 0;
	if (def->kind == MJ_REACHER) {
		*first = 0;
		*count = 4;
	} else if (def->kind == MJ_IDPEND) {
		*first = 1;
		*count = 2 * (def->nq - 1);
	}
	return 0;
}

int sr__mujoco_reset_how(const sr_env_spec *spec, void *states, size_t n, void *obs, int how)
{
	double *o = obs;

	if (!sr__mj_def_of(spec) || how < RESET_FAST || how > RESET_GARBAGE)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		reset_one(inst_of((char *)states + i * spec->state_size), o + i * spec->obs_dim,
			  how);
	return 0;
}

int sr__mujoco_sizes(const void *state, size_t *buffer_bytes, size_t *stack_bytes,
		     int *nefc, int *ncon)
{
	const struct inst *e = inst_of(state);

	if (!e)
		return -EINVAL;
	if (buffer_bytes)
		*buffer_bytes = (size_t)e->d->nbuffer;
	if (stack_bytes)
		*stack_bytes = (size_t)e->d->nstack * sizeof(mjtNum);
	if (nefc)
		*nefc = e->d->nefc;
	if (ncon)
		*ncon = e->d->ncon;
	return 0;
}

int sr__mujoco_save_layout(const sr_env_spec *spec, size_t *hdr, size_t *cur, size_t *pre,
			   size_t *info)
{
	const struct mj_def *def = sr__mj_def_of(spec);

	if (!def)
		return -EINVAL;
	*hdr = sizeof(struct save_hdr);
	*cur = 8 * (size_t)(def->nq + 2 * def->nv + 1);
	*pre = *cur + 8 * (size_t)def->nu;
	*info = 8 * (size_t)def->n_info;
	return 0;
}

int sr__mujoco_configure(sr_env_spec *spec, const char *params)
{
	return sr__mj_configure(spec, params);
}

/* ---- the specs ------------------------------------------------------------------ */

static const float a_1[17] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
static const float b_1[17] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
static const float a_04[17] = {-0.4f, -0.4f, -0.4f, -0.4f, -0.4f, -0.4f, -0.4f, -0.4f, -0.4f,
			       -0.4f, -0.4f, -0.4f, -0.4f, -0.4f, -0.4f, -0.4f, -0.4f};
static const float b_04[17] = {0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f,
			       0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f};
static const float a_2[7] = {-2, -2, -2, -2, -2, -2, -2};
static const float b_2[7] = {2, 2, 2, 2, 2, 2, 2};
static const float a_3[1] = {-3};
static const float b_3[1] = {3};

#define MJ_SPEC(sym, ID, NAME, OBS, STEPS, NU, LO, HI, NQ, NV, P0)                          \
	const sr_env_spec sym = {                                                          \
		.abi_version = SR_ENV_ABI_VERSION,                                         \
		.spec_size = sizeof(sr_env_spec),                                          \
		.id = ID,                                                                  \
		.name = NAME,                                                              \
		.state_size = 8,                                                           \
		.max_episode_steps = STEPS,                                                \
		.obs_ndim = 1,                                                             \
		.obs_shape = {OBS},                                                        \
		.obs_dim = OBS,                                                            \
		.act_kind = SR_SPACE_BOX,                                                  \
		.act_dim = NU,                                                             \
		.act_low = LO,                                                             \
		.act_high = HI,                                                            \
		.n_phys = (NQ) + (NV),                                                     \
		.params = {P0},                                                            \
		.seed = mj_seed,                                                           \
		.reset = mj_reset,                                                         \
		.step = mj_step_batch,                                                     \
		.observe = mj_observe,                                                     \
		.get_phys = mj_get_phys,                                                   \
		.set_phys = mj_set_phys,                                                   \
		.flags = SR_ENV_F_OPAQUE,                                                  \
		.save_max = SAVE_BOUND(NQ, NV, NU),                                        \
		.check_state = mj_check_state,                                             \
		.create = mj_create,                                                       \
		.destroy = mj_destroy,                                                     \
		.save = mj_save,                                                           \
		.load = mj_load,                                                           \
		.obs_dtype = SR_DTYPE_FLOAT64,                                             \
		.obs_kind = SR_SPACE_BOX,                                                  \
	}

/* params[0] of each type's defaults (the model file by its index in the
 * embedded table: the defs' X_* order is the files' alphabetical order,
 * which is the table's, checked by test_mujoco). */
#define EXCL F_EXCLUDE
#define TERM F_TERMINATE
#define ALLV5 (F_CINERT | F_CVEL | F_QFRC | F_CFRC)

MJ_SPEC(sr__env_halfcheetah, "HalfCheetah-v5", "halfcheetah", 17, 1000, 6, a_1, b_1, 9, 9,
	MJ_P0(5, EXCL, 0, X_HC));
MJ_SPEC(sr__env_halfcheetah_v4, "HalfCheetah-v4", "halfcheetah_v4", 17, 1000, 6, a_1, b_1, 9, 9,
	MJ_P0(5, EXCL, 0, X_HC));
MJ_SPEC(sr__env_hopper, "Hopper-v5", "hopper", 11, 1000, 3, a_1, b_1, 6, 6,
	MJ_P0(4, EXCL | TERM, 0, X_HOP));
MJ_SPEC(sr__env_hopper_v4, "Hopper-v4", "hopper_v4", 11, 1000, 3, a_1, b_1, 6, 6,
	MJ_P0(4, EXCL | TERM, 0, X_HOP));
MJ_SPEC(sr__env_walker2d, "Walker2d-v5", "walker2d", 17, 1000, 6, a_1, b_1, 9, 9,
	MJ_P0(4, EXCL | TERM, 0, X_WALK5));
MJ_SPEC(sr__env_walker2d_v4, "Walker2d-v4", "walker2d_v4", 17, 1000, 6, a_1, b_1, 9, 9,
	MJ_P0(4, EXCL | TERM, 0, X_WALK4));
MJ_SPEC(sr__env_ant, "Ant-v5", "ant", 105, 1000, 8, a_1, b_1, 15, 14,
	MJ_P0(5, EXCL | TERM | F_CFRC, 1, X_ANT));
MJ_SPEC(sr__env_ant_v4, "Ant-v4", "ant_v4", 27, 1000, 8, a_1, b_1, 15, 14,
	MJ_P0(5, EXCL | TERM, 1, X_ANT));
MJ_SPEC(sr__env_humanoid, "Humanoid-v5", "humanoid", 348, 1000, 17, a_04, b_04, 24, 23,
	MJ_P0(5, EXCL | TERM | ALLV5, 0, X_HUM));
MJ_SPEC(sr__env_humanoid_v4, "Humanoid-v4", "humanoid_v4", 376, 1000, 17, a_04, b_04, 24, 23,
	MJ_P0(5, EXCL | TERM, 0, X_HUM));
MJ_SPEC(sr__env_humanoidstandup, "HumanoidStandup-v5", "humanoidstandup", 348, 1000, 17, a_04,
	b_04, 24, 23, MJ_P0(5, EXCL | ALLV5, 0, X_STD));
MJ_SPEC(sr__env_humanoidstandup_v4, "HumanoidStandup-v4", "humanoidstandup_v4", 376, 1000, 17,
	a_04, b_04, 24, 23, MJ_P0(5, EXCL, 0, X_STD));
MJ_SPEC(sr__env_invertedpendulum, "InvertedPendulum-v5", "invertedpendulum", 4, 1000, 1, a_3,
	b_3, 2, 2, MJ_P0(2, 0, 0, X_IP));
MJ_SPEC(sr__env_invertedpendulum_v4, "InvertedPendulum-v4", "invertedpendulum_v4", 4, 1000, 1,
	a_3, b_3, 2, 2, MJ_P0(2, 0, 0, X_IP));
MJ_SPEC(sr__env_inverteddoublependulum, "InvertedDoublePendulum-v5", "inverteddoublependulum",
	9, 1000, 1, a_1, b_1, 3, 3, MJ_P0(5, 0, 0, X_IDP));
MJ_SPEC(sr__env_inverteddoublependulum_v4, "InvertedDoublePendulum-v4",
	"inverteddoublependulum_v4", 11, 1000, 1, a_1, b_1, 3, 3, MJ_P0(5, 0, 0, X_IDP));
MJ_SPEC(sr__env_reacher, "Reacher-v5", "reacher", 10, 50, 2, a_1, b_1, 4, 4,
	MJ_P0(2, 0, 0, X_REACH));
MJ_SPEC(sr__env_reacher_v4, "Reacher-v4", "reacher_v4", 11, 50, 2, a_1, b_1, 4, 4,
	MJ_P0(2, 0, 0, X_REACH));
MJ_SPEC(sr__env_swimmer, "Swimmer-v5", "swimmer", 8, 1000, 2, a_1, b_1, 5, 5,
	MJ_P0(4, EXCL, 0, X_SWIM));
MJ_SPEC(sr__env_swimmer_v4, "Swimmer-v4", "swimmer_v4", 8, 1000, 2, a_1, b_1, 5, 5,
	MJ_P0(4, EXCL, 0, X_SWIM));
MJ_SPEC(sr__env_pusher, "Pusher-v5", "pusher", 23, 100, 7, a_2, b_2, 11, 11,
	MJ_P0(5, 0, 0, X_PUSH5));
MJ_SPEC(sr__env_pusher_v4, "Pusher-v4", "pusher_v4", 23, 100, 7, a_2, b_2, 11, 11,
	MJ_P0(5, 0, 0, X_PUSH4));

/* The model files' names in X_* order (test_mujoco checks them against
 * the embedded table). */
const char *sr__mujoco_xml_name(unsigned x)
{
	return x < X_COUNT ? xml_names[x] : NULL;
}
