/*
 * Parameters of the MuJoCo envs: Gymnasium's constructor arguments, as
 * "Hopper-v5:ctrl_cost_weight=0.002,healthy_z_range=0.6:inf,frame_skip=5".
 *
 * Each env type takes the arguments its Gymnasium class takes, with the
 * same names and defaults (v4 classes take fewer: no frame_skip, mostly no
 * xml_file), and rng=numpy|stepring. Values: numbers (finite; a range is
 * "low:high", where low and high may be -inf/inf and low <= high), flags
 * 0/1/true/false, frame_skip an integer in [1, 255], main_body a body id
 * or name of the model, xml_file the name of a bundled model with the same
 * structure as the env's own (walker2d.xml and walker2d_v5.xml, pusher.xml
 * and pusher_v5.xml, humanoid.xml and humanoidstandup.xml; not a path: a
 * worker process and a checkpoint rebuild an env type from the spec's
 * numbers alone).
 *
 * The parameters are packed into the spec's params[8] (mj_internal.h).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mj_internal.h"

enum pkind { PK_NUM, PK_RANGE, PK_FLAG, PK_FRAME_SKIP, PK_BODY, PK_XML, PK_RNG };

struct pdesc {
	const char *key;
	uint8_t kind;
	uint32_t arg; /* slot (PK_NUM, PK_RANGE: the low one) or flag bit */
};

/* The keys; an env takes those of its def's key mask (bit i = keys[i]). */
static const struct pdesc keys[] = {
	{"forward_reward_weight", PK_NUM, S_FWD},
	{"ctrl_cost_weight", PK_NUM, S_CTRL},
	{"reward_control_weight", PK_NUM, S_CTRL},
	{"contact_cost_weight", PK_NUM, S_CONTACT},
	{"impact_cost_weight", PK_NUM, S_CONTACT},
	{"healthy_reward", PK_NUM, S_HEALTHY},
	{"reset_noise_scale", PK_NUM, S_NOISE},
	{"healthy_z_range", PK_RANGE, S_Z_LO},
	{"healthy_state_range", PK_RANGE, S_STATE_LO},
	{"healthy_angle_range", PK_RANGE, S_ANGLE_LO},
	{"contact_force_range", PK_RANGE, S_CF_LO},
	{"contact_cost_range", PK_RANGE, S_CC_LO},
	{"impact_cost_range", PK_RANGE, S_CC_LO},
	{"uph_cost_weight", PK_NUM, S_UPH},
	{"reward_dist_weight", PK_NUM, S_DIST},
	{"reward_near_weight", PK_NUM, S_NEAR},
	{"terminate_when_unhealthy", PK_FLAG, F_TERMINATE},
	{"exclude_current_positions_from_observation", PK_FLAG, F_EXCLUDE},
	{"include_cinert_in_observation", PK_FLAG, F_CINERT},
	{"include_cvel_in_observation", PK_FLAG, F_CVEL},
	{"include_qfrc_actuator_in_observation", PK_FLAG, F_QFRC},
	{"include_cfrc_ext_in_observation", PK_FLAG, F_CFRC},
	{"use_contact_forces", PK_FLAG, F_CONTACT_FORCES},
	{"frame_skip", PK_FRAME_SKIP, 0},
	{"main_body", PK_BODY, 0},
	{"xml_file", PK_XML, 0},
	{"rng", PK_RNG, 0},
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

_Static_assert(NKEYS == MJ_NKEY && NKEYS <= 32, "keys[] follows enum mj_key");

static bool flag_of(const char *v, bool *out)
{
	if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "True")) {
		*out = true;
		return true;
	}
	if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "False")) {
		*out = false;
		return true;
	}
	return false;
}

/* A number; inf/-inf only where @allow_inf. */
static bool number_of(const char *v, bool allow_inf, double *out)
{
	char *e;
	double d;

	if (!*v)
		return false;
	d = strtod(v, &e);
	if (*e || isnan(d) || (!allow_inf && isinf(d)))
		return false;
	*out = d;
	return true;
}

static uint64_t dbits(double d)
{
	uint64_t u;
	memcpy(&u, &d, 8);
	return u;
}

static double bitsd(uint64_t u)
{
	double d;
	memcpy(&d, &u, 8);
	return d;
}

void sr__mj_cfg(const sr_env_spec *spec, struct mj_cfg *cfg)
{
	const struct mj_def *def = sr__mj_def_of(spec);
	uint64_t p0 = spec->params[0];
	uint32_t mask = (uint32_t)p0;
	int k = 1;

	memcpy(cfg->num, def->num, sizeof(cfg->num));
	for (int s = 0; s < MJ_NSLOT && k < 8; s++)
		if (mask & (1u << s))
			cfg->num[s] = bitsd(spec->params[k++]);
	cfg->frame_skip = (uint32_t)(p0 >> 32) & 0xff;
	cfg->flags = (uint32_t)(p0 >> 40) & 0xff;
	cfg->main_body = (uint32_t)(p0 >> 48) & 0xff;
	cfg->xml = (uint32_t)(p0 >> 56) & 0xf;
}

/* Pack @cfg into @spec->params; -EINVAL when more than MJ_MAX_OVERRIDES
 * numbers differ from the defaults. */
static int pack(sr_env_spec *spec, const struct mj_def *def, const struct mj_cfg *cfg)
{
	uint64_t p[8] = {0};
	uint32_t mask = 0;
	int k = 1;

	for (int s = 0; s < MJ_NSLOT; s++) {
		if (dbits(cfg->num[s]) == dbits(def->num[s]))
			continue;
		if (k == 8)
			return sr__errorf(-EINVAL,
					  "env '%s': at most %d numbers (a range counts two) may "
					  "differ from their defaults at once",
					  def->id, MJ_MAX_OVERRIDES);
		mask |= 1u << s;
		p[k++] = dbits(cfg->num[s]);
	}
	p[0] = mask | MJ_P0(cfg->frame_skip, cfg->flags, cfg->main_body, cfg->xml);
	memcpy(spec->params, p, sizeof(p));
	return 0;
}

uint32_t sr__mj_obs_dim(const struct mj_def *def, const struct mj_cfg *cfg)
{
	uint32_t nq = def->nq, nv = def->nv, nb = def->nbody, f = cfg->flags;
	uint32_t ex = (f & F_EXCLUDE) ? 1 : 0;

	switch (def->kind) {
	case MJ_HALFCHEETAH:
	case MJ_HOPPER:
	case MJ_WALKER2D:
		return nq - ex + nv;
	case MJ_ANT:
		if (def->version == 4)
			return nq - 2 * ex + nv + ((f & F_CONTACT_FORCES) ? 6 * nb : 0);
		return nq - 2 * ex + nv + ((f & F_CFRC) ? 6 * (nb - 1) : 0);
	case MJ_HUMANOID:
	case MJ_STANDUP:
		if (def->version == 4)
			return nq - 2 * ex + nv + 10 * nb + 6 * nb + nv + 6 * nb;
		return nq - 2 * ex + nv + ((f & F_CINERT) ? 10 * (nb - 1) : 0) +
		       ((f & F_CVEL) ? 6 * (nb - 1) : 0) + ((f & F_QFRC) ? nv - 6 : 0) +
		       ((f & F_CFRC) ? 6 * (nb - 1) : 0);
	case MJ_IPEND:
		return nq + nv;
	case MJ_IDPEND:
		return def->version == 4 ? 1 + 2 * (nq - 1) + nv + nv : 1 + 2 * (nq - 1) + nv + 1;
	case MJ_REACHER:
		return 2 + 2 + (nq - 2) + 2 + (def->version == 4 ? 3 : 2);
	case MJ_SWIMMER:
		return nq - 2 * ex + nv;
	case MJ_PUSHER:
		return 7 + 7 + 3 + 3 + 3;
	}
	return 0;
}

/* A bundled model that can stand in for @def's own: the same sizes and
 * action bounds, and the bodies the env reads by name. */
static int check_xml(const struct mj_def *def, uint32_t xml)
{
	const struct mj_model *own, *alt;
	int err = sr__mj_model(def->xml, &own);

	if (err || (err = sr__mj_model(xml, &alt)))
		return err;
	const mjModel *a = own->m, *b = alt->m;
	bool same = a->nq == b->nq && a->nv == b->nv && a->nu == b->nu && a->na == b->na &&
		    a->nbody == b->nbody && a->nsite == b->nsite && a->ntendon == b->ntendon &&
		    (own->body_torso < 0) == (alt->body_torso < 0) &&
		    (own->body_fingertip < 0) == (alt->body_fingertip < 0) &&
		    (own->body_target < 0) == (alt->body_target < 0) &&
		    (own->body_object < 0) == (alt->body_object < 0) &&
		    (own->body_tips_arm < 0) == (alt->body_tips_arm < 0) &&
		    (own->body_goal < 0) == (alt->body_goal < 0);
	for (int i = 0; same && i < 2 * a->nu; i++)
		same = (float)a->actuator_ctrlrange[i] == (float)b->actuator_ctrlrange[i];
	if (!same)
		return sr__errorf(-EINVAL, "env '%s': xml_file=%s is not a model of this env (its "
				  "sizes, action bounds or named bodies differ from %s's)",
				  def->id, sr__mj_assets[xml].name, sr__mj_assets[def->xml].name);
	return 0;
}

static int resolve_body(const struct mj_def *def, uint32_t xml, const char *v, uint32_t *out)
{
	const struct mj_model *mm;
	int err = sr__mj_model(xml, &mm), id;
	char *e;
	long n;

	if (err)
		return err;
	n = strtol(v, &e, 10);
	if (*v && !*e)
		id = n >= 0 && n < mm->m->nbody ? (int)n : -1;
	else
		id = mj_name2id(mm->m, mjOBJ_BODY, v);
	if (id < 0 || id > 255)
		return sr__errorf(-EINVAL, "env '%s': main_body='%s' is not a body of %s (an id in "
				  "[0, %d) or a body name)",
				  def->id, v, sr__mj_assets[xml].name, mm->m->nbody);
	*out = (uint32_t)id;
	return 0;
}

static void list_keys(const struct mj_def *def, char *buf, size_t len)
{
	uint32_t mask = def->keys;
	size_t off = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < NKEYS && off < len; i++)
		if (mask & (1u << i))
			off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? ", " : "",
						keys[i].key);
}

int sr__mj_configure(sr_env_spec *spec, const char *params)
{
	const struct mj_def *def = sr__mj_def_of(spec);
	uint32_t mask = def->keys, seen = 0;
	const char *p = params, *body = NULL;
	char body_buf[128];
	struct mj_cfg cfg;
	sr_env_spec s = *spec;
	int err;

	sr__mj_cfg(spec, &cfg);
	while (*p) {
		const char *eq = strchr(p, '='), *end = strchr(p, ',');
		char key[64], val[128];
		unsigned k;

		if (!end)
			end = p + strlen(p);
		if (!eq || eq > end || eq == p || (size_t)(eq - p) >= sizeof(key) ||
		    (size_t)(end - eq - 1) >= sizeof(val))
			return sr__errorf(-EINVAL, "env '%s': bad parameter '%.*s' (key=value)",
					  def->id, (int)(end - p > 80 ? 80 : end - p), p);
		memcpy(key, p, (size_t)(eq - p));
		key[eq - p] = '\0';
		memcpy(val, eq + 1, (size_t)(end - eq - 1));
		val[end - eq - 1] = '\0';
		p = *end ? end + 1 : end;
		for (k = 0; k < NKEYS; k++)
			if ((mask & (1u << k)) && !strcmp(keys[k].key, key))
				break;
		if (k == NKEYS) {
			char known[1024];
			list_keys(def, known, sizeof(known));
			return sr__errorf(-EINVAL, "env '%s': unknown parameter '%s' (it takes %s)",
					  def->id, key, known);
		}
		if (seen & (1u << k))
			return sr__errorf(-EINVAL, "env '%s': parameter '%s' given twice", def->id,
					  key);
		seen |= 1u << k;

		const struct pdesc *d = &keys[k];
		bool b;
		double lo, hi;
		char *e, *colon;
		long n;

		switch (d->kind) {
		case PK_NUM:
			if (!number_of(val, false, &cfg.num[d->arg]))
				return sr__errorf(-EINVAL, "env '%s': %s='%s' is not a finite number",
						  def->id, key, val);
			break;
		case PK_RANGE:
			colon = strchr(val, ':');
			if (colon)
				*colon = '\0';
			if (!colon || !number_of(val, true, &lo) || !number_of(colon + 1, true, &hi))
				return sr__errorf(-EINVAL, "env '%s': %s='%s%s%s' is not a range "
						  "low:high (numbers; -inf and inf allowed)",
						  def->id, key, val, colon ? ":" : "",
						  colon ? colon + 1 : "");
			if (lo > hi)
				return sr__errorf(-EINVAL, "env '%s': %s: low %g is above high %g",
						  def->id, key, lo, hi);
			cfg.num[d->arg] = lo;
			cfg.num[d->arg + 1] = hi;
			break;
		case PK_FLAG:
			if (!flag_of(val, &b))
				return sr__errorf(-EINVAL, "env '%s': %s='%s' must be 0 or 1", def->id,
						  key, val);
			cfg.flags = b ? cfg.flags | d->arg : cfg.flags & ~d->arg;
			break;
		case PK_FRAME_SKIP:
			n = strtol(val, &e, 10);
			if (!*val || *e || n < 1 || n > MJ_MAX_FRAME_SKIP)
				return sr__errorf(-EINVAL, "env '%s': frame_skip='%s' must be an "
						  "integer in [1, %d]",
						  def->id, val, MJ_MAX_FRAME_SKIP);
			cfg.frame_skip = (uint32_t)n;
			break;
		case PK_BODY: /* resolved below, with the final xml_file */
			snprintf(body_buf, sizeof(body_buf), "%s", val);
			body = body_buf;
			break;
		case PK_XML: {
			int x = sr__mj_asset_index(val);
			if (x < 0 || strchr(val, '/')) {
				char names[512];
				size_t off = 0;
				for (unsigned i = 0; i < sr__mj_assets_count && off < sizeof(names); i++)
					off += (size_t)snprintf(names + off, sizeof(names) - off,
								"%s%s", i ? ", " : "",
								sr__mj_assets[i].name);
				return sr__errorf(-EINVAL, "env '%s': xml_file='%s' is not a bundled "
						  "model (%s); files are not read: a worker "
						  "process or a checkpoint rebuilds the env from "
						  "its parameters alone",
						  def->id, val, names);
			}
			if ((err = check_xml(def, (uint32_t)x)))
				return err;
			cfg.xml = (uint32_t)x;
			break;
		}
		case PK_RNG:
			if (strcmp(val, "numpy") && strcmp(val, "stepring"))
				return sr__errorf(-EINVAL, "env '%s': rng='%s' (numpy or stepring)",
						  def->id, val);
			cfg.flags = !strcmp(val, "stepring") ? cfg.flags | F_STEPRING_RNG
							     : cfg.flags & ~F_STEPRING_RNG;
			break;
		}
	}
	if (body && (err = resolve_body(def, cfg.xml, body, &cfg.main_body)))
		return err;
	if ((err = pack(&s, def, &cfg)))
		return err;
	s.obs_dim = s.obs_shape[0] = sr__mj_obs_dim(def, &cfg);
	*spec = s;
	return 0;
}
