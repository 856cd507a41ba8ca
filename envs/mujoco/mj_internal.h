/*
 * The MuJoCo envs (internal to envs/mujoco/): Gymnasium 1.3.0's MuJoCo
 * environments, v5 and v4, on libmujoco 2.2.2, behind the C env ABI with
 * opaque state (ABI v2) and float64 observations (ABI v3).
 *
 * Files: mj_model.c loads the embedded models (MuJoCo's virtual file
 * system) and keeps one read-only mjModel per model file for the process;
 * mj_params.c parses, validates and packs an env's parameters into the
 * spec's params[8] (the spec is all a worker process or a checkpoint knows
 * of an env type); mj_envs.c has the instances, the 22 env types and the
 * ABI hooks. Only this folder includes <mujoco/mujoco.h>.
 *
 * Parameters travel in params[8]: word 0 packs the integers and flags
 * (MJ_P0 below) and a mask of the numeric parameters that differ from the
 * env's defaults, words 1..7 hold those values in slot order. So at most 7
 * numbers (a range is two) may differ from their defaults at once.
 */
#ifndef SR_MJ_INTERNAL_H
#define SR_MJ_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <mujoco/mujoco.h>

#include "envs.h"
#include "sr_base.h" /* sr__errorf */
#include "np_random.h"

/* One embedded file (cmake/embed_files.cmake writes the table). */
struct sr__embedded {
	const char *name;
	const unsigned char *data;
	unsigned size;
};

extern const struct sr__embedded sr__mj_assets[];
extern const unsigned sr__mj_assets_count;

/* The env families. */
enum mj_kind {
	MJ_HALFCHEETAH,
	MJ_HOPPER,
	MJ_WALKER2D,
	MJ_ANT,
	MJ_HUMANOID,
	MJ_STANDUP,
	MJ_IPEND,
	MJ_IDPEND,
	MJ_REACHER,
	MJ_SWIMMER,
	MJ_PUSHER,
	MJ_NKIND
};

/* Numeric parameter slots (cfg.num[]); a range takes two. */
enum mj_slot {
	S_FWD,        /* forward_reward_weight */
	S_CTRL,       /* ctrl_cost_weight, reward_control_weight */
	S_CONTACT,    /* contact_cost_weight, impact_cost_weight */
	S_HEALTHY,    /* healthy_reward */
	S_NOISE,      /* reset_noise_scale */
	S_Z_LO,       /* healthy_z_range */
	S_Z_HI,
	S_STATE_LO,   /* healthy_state_range */
	S_STATE_HI,
	S_ANGLE_LO,   /* healthy_angle_range */
	S_ANGLE_HI,
	S_CF_LO,      /* contact_force_range */
	S_CF_HI,
	S_CC_LO,      /* contact_cost_range, impact_cost_range */
	S_CC_HI,
	S_UPH,        /* uph_cost_weight */
	S_DIST,       /* reward_dist_weight */
	S_NEAR,       /* reward_near_weight */
	MJ_NSLOT
};

/* The parameter keys (mj_params.c's table, in this order); a def takes
 * those of its key mask. */
enum mj_key {
	K_FWD, K_CTRL, K_RCTRL, K_CONTACT, K_IMPACT, K_HEALTHY, K_NOISE, K_Z, K_STATE, K_ANGLE,
	K_CF, K_CC, K_IC, K_UPH, K_DIST, K_NEAR, K_TERM, K_EXCL, K_CINERT, K_CVEL, K_QFRC,
	K_CFRC, K_UCF, K_FS, K_BODY, K_XML, K_RNG, MJ_NKEY
};
#define KB(k) (1u << (k))

/* Flags (cfg.flags, params[0] bits 40..47). */
enum {
	F_TERMINATE = 1u << 0,   /* terminate_when_unhealthy */
	F_EXCLUDE = 1u << 1,     /* exclude_current_positions_from_observation */
	F_CINERT = 1u << 2,      /* include_cinert_in_observation */
	F_CVEL = 1u << 3,        /* include_cvel_in_observation */
	F_QFRC = 1u << 4,        /* include_qfrc_actuator_in_observation */
	F_CFRC = 1u << 5,        /* include_cfrc_ext_in_observation */
	F_CONTACT_FORCES = 1u << 6, /* use_contact_forces (Ant-v4) */
	F_STEPRING_RNG = 1u << 7,   /* rng=stepring (the default is numpy) */
};

/* params[0]: mask of overridden slots (bits 0..31), frame_skip (32..39),
 * flags (40..47), main body id (48..55), model file index (56..59),
 * format (60..63). */
#define MJ_PARAMS_FORMAT 1ull
#define MJ_P0(frame_skip, flags, body, xml)                                                \
	(((uint64_t)(frame_skip) << 32) | ((uint64_t)(flags) << 40) |                      \
	 ((uint64_t)(body) << 48) | ((uint64_t)(xml) << 56) | (MJ_PARAMS_FORMAT << 60))
#define MJ_MAX_OVERRIDES 7
#define MJ_MAX_FRAME_SKIP 255
#define MJ_MAX_INFO 16

/* What an env type is: its family, version, defaults and sizes. */
struct mj_def {
	const char *id, *name;
	uint8_t kind, version;
	uint8_t xml;          /* default model file (index in sr__mj_assets) */
	uint8_t frame_skip;   /* default */
	uint32_t flags;       /* default flags */
	uint8_t main_body;    /* default (Ant-v5's main_body; 1 = torso) */
	uint32_t keys;        /* KB() mask of the parameters this env takes */
	double num[MJ_NSLOT]; /* defaults */
	uint32_t nq, nv, nu, nbody; /* of the default model (checked at load) */
	uint32_t n_info;
	const char *const *info_names;
	uint32_t n_reset_info; /* the first info terms (in this order) that reset() gives */
	const uint8_t *reset_info; /* their indices in info_names */
};

/* An env type's parameters, unpacked from params[8]. */
struct mj_cfg {
	double num[MJ_NSLOT];
	uint32_t flags;
	uint32_t frame_skip;
	uint32_t main_body;
	uint32_t xml;
};

/* The process's model of one file, with what the envs read of it. */
struct mj_model {
	mjModel *m;
	uint64_t hash;             /* FNV-1a of the file's text */
	double mass_sum;           /* body_mass.sum() (NumPy's pairwise order) */
	int body_torso, body_fingertip, body_target, body_object, body_tips_arm, body_goal;
};

/* The env type of a spec (by its name), or NULL when it is not a MuJoCo env. */
const struct mj_def *sr__mj_def_of(const sr_env_spec *spec);
/* The definitions of all 22 env types. */
extern const struct mj_def sr__mj_defs[];
extern const unsigned sr__mj_ndefs;

/* The process's model of file @xml (loaded on first use, under a mutex;
 * never freed). 0 or -errno (-ENOMEM, -EIO for a model MuJoCo refuses,
 * the message in sr_last_error()). */
int sr__mj_model(uint32_t xml, const struct mj_model **out);
/* Index of the embedded file @name, or -1. */
int sr__mj_asset_index(const char *name);

/* Unpack @spec's params (validated when the spec was made). */
void sr__mj_cfg(const sr_env_spec *spec, struct mj_cfg *cfg);
/* The observation size of @def with @cfg. */
uint32_t sr__mj_obs_dim(const struct mj_def *def, const struct mj_cfg *cfg);
/* Apply "key=value,..." to @spec (a copy of a MuJoCo spec). 0 or -EINVAL. */
int sr__mj_configure(sr_env_spec *spec, const char *params);

#endif
