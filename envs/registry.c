/* Env registry: built-in types by Gymnasium id or short name, spin
 * parameters, plugin loading and spec validation. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sr_base.h"
#include "stepring/env.h"
#include "envs.h"

static const sr_env_spec *const builtin[] = {
#define SR_ENV_ENTRY(sym) &sym,
	SR_BUILTIN_ENVS(SR_ENV_ENTRY)
#undef SR_ENV_ENTRY
};

#define N_BUILTIN (sizeof(builtin) / sizeof(builtin[0]))

size_t sr_env_count(void)
{
	return N_BUILTIN;
}

const sr_env_spec *sr_env_at(size_t i)
{
	return i < N_BUILTIN ? builtin[i] : NULL;
}

/* The id of a spec whose version is unknown, if its size says it has one. */
static const char *spec_id(const sr_env_spec *s)
{
	return s->spec_size >= offsetof(sr_env_spec, name) + sizeof(char *) && s->id ? s->id : "?";
}

static int check_version(const sr_env_spec *s)
{
	if (s->abi_version < SR_ENV_ABI_VERSION_MIN || s->abi_version > SR_ENV_ABI_VERSION)
		return sr__errorf(-EPROTO,
				  "env '%s' was built for env ABI version %u, this stepring "
				  "expects version %u (version 2 and version %u still load): "
				  "rebuild the plugin against this stepring",
				  spec_id(s), s->abi_version, SR_ENV_ABI_VERSION,
				  SR_ENV_ABI_VERSION_MIN);
	return 0;
}

static bool is_int_dtype(uint32_t dt)
{
	return dt != SR_DTYPE_FLOAT32 && dt != SR_DTYPE_FLOAT64 && dt < SR_DTYPE_COUNT;
}

/* The v3 tail: a known dtype and space kind, bounds that the dtype holds
 * (integers for an integer dtype), and a space that fits its dtype. */
static int check_obs_space(const sr_env_spec *s)
{
	uint32_t kind = s->obs_kind ? s->obs_kind : SR_SPACE_BOX;
	bool integral = is_int_dtype(s->obs_dtype);

	if (s->obs_dtype >= SR_DTYPE_COUNT)
		return sr__errorf(-EINVAL, "env '%s': unknown obs_dtype %u", s->id, s->obs_dtype);
	if (kind < SR_SPACE_DISCRETE || kind > SR_SPACE_MULTI_BINARY)
		return sr__errorf(-EINVAL, "env '%s': unknown obs_kind %u", s->id, s->obs_kind);
	if (kind != SR_SPACE_BOX && !integral)
		return sr__errorf(-EINVAL, "env '%s': a discrete, multi-discrete or multi-binary "
				  "observation needs an integer or bool obs_dtype, not %s",
				  s->id, sr_dtype_name(s->obs_dtype));
	if (!s->obs_low64 != !s->obs_high64)
		return sr__errorf(-EINVAL, "env '%s': obs_low64 and obs_high64: both or neither",
				  s->id);
	if (kind != SR_SPACE_BOX && !s->obs_low64 && !(s->obs_low && s->obs_high))
		return sr__errorf(-EINVAL, "env '%s': an integer observation space needs its "
				  "bounds", s->id);
	for (uint32_t i = 0; s->obs_low64 && i < s->obs_dim; i++) {
		double lo = s->obs_low64[i], hi = s->obs_high64[i];

		if (!(lo <= hi))
			return sr__errorf(-EINVAL, "env '%s': obs bound %u: low > high or NaN",
					  s->id, i);
		if (integral && (lo != floor(lo) || hi != floor(hi)))
			return sr__errorf(-EINVAL, "env '%s': obs bound %u is not an integer, for "
					  "obs_dtype %s", s->id, i, sr_dtype_name(s->obs_dtype));
		if (kind == SR_SPACE_MULTI_BINARY && (lo != 0 || hi != 1))
			return sr__errorf(-EINVAL, "env '%s': multi-binary obs bound %u must be "
					  "[0, 1]", s->id, i);
	}
	return 0;
}

int sr_env_validate(const sr_env_spec *s)
{
	uint64_t prod = 1;
	uint32_t want;
	bool scalar;
	int err;

	if (!s)
		return sr__errorf(-EINVAL, "env spec is NULL");
	err = check_version(s);
	if (err)
		return err;
	want = s->abi_version == 1   ? SR_ENV_SPEC_SIZE_V1
	       : s->abi_version == 2 ? SR_ENV_SPEC_SIZE_V2
				     : (uint32_t)sizeof(sr_env_spec);
	if (s->spec_size != want)
		return sr__errorf(-EPROTO,
				  "env spec size %u != %u expected for env ABI version %u (ABI "
				  "mismatch)",
				  s->spec_size, want, s->abi_version);
	if (!s->id || !s->name || !s->id[0] || !s->name[0])
		return sr__errorf(-EINVAL, "env spec has no id or name");
	/* Checkpoints and the statistics block keep the id in 64 bytes: a
	 * longer one would be cut there and never match again on restore. */
	if (strnlen(s->id, SR_ENV_ID_MAX + 1) > SR_ENV_ID_MAX ||
	    strnlen(s->name, SR_ENV_ID_MAX + 1) > SR_ENV_ID_MAX)
		return sr__errorf(-EINVAL, "env id or name longer than %d bytes (\"%.40s...\")",
				  SR_ENV_ID_MAX, s->id);
	for (const char *c = s->id; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return sr__errorf(-EINVAL, "env id has a control character (byte %ld)",
					  (long)(c - s->id));
	if (!s->seed || !s->reset || !s->step || !s->observe)
		return sr__errorf(-EINVAL, "env '%s': seed, reset, step and observe are required",
				  s->id);
	if (s->state_size == 0 || s->state_size % 8 || s->state_size > SR_ENV_MAX_STATE_SIZE)
		return sr__errorf(-EINVAL,
				  "env '%s': state_size %u must be a positive multiple of 8, at "
				  "most %u",
				  s->id, s->state_size, (unsigned)SR_ENV_MAX_STATE_SIZE);
	/* A discrete observation (v3) is a scalar: obs_ndim 0, obs_dim 1. */
	scalar = s->abi_version >= 3 && s->obs_kind == SR_SPACE_DISCRETE;
	if (scalar ? s->obs_ndim != 0 : s->obs_ndim == 0 || s->obs_ndim > SR_ENV_MAX_DIMS)
		return sr__errorf(-EINVAL, "env '%s': obs_ndim %u not in [%d, %d]", s->id,
				  s->obs_ndim, scalar ? 0 : 1, scalar ? 0 : SR_ENV_MAX_DIMS);
	/* Overflow-checked: stop as soon as the product leaves the bound
	 * (eight uint32 factors would wrap a uint64). */
	for (uint32_t i = 0; i < s->obs_ndim && prod && prod <= (1u << 24); i++)
		prod *= s->obs_shape[i];
	if (prod == 0 || prod > (1u << 24))
		return sr__errorf(-EINVAL, "env '%s': obs_shape's product is 0 or above 2^24",
				  s->id);
	if (prod != s->obs_dim)
		return sr__errorf(-EINVAL, "env '%s': obs_dim %u does not match its shape", s->id,
				  s->obs_dim);
	for (uint32_t i = 0; s->obs_low && s->obs_high && i < s->obs_dim; i++)
		if (!(s->obs_low[i] <= s->obs_high[i]))
			return sr__errorf(-EINVAL, "env '%s': obs bound %u: low > high or NaN", s->id,
					  i);
	if (s->abi_version >= 3) {
		err = check_obs_space(s);
		if (err)
			return err;
	}
	if (s->act_kind == SR_SPACE_DISCRETE) {
		if (s->act_n == 0 || s->act_n > INT32_MAX || s->act_dim != 1)
			return sr__errorf(-EINVAL,
					  "env '%s': discrete action needs act_n in [1, 2^31), "
					  "act_dim = 1",
					  s->id);
	} else if (s->act_kind == SR_SPACE_BOX) {
		if (s->act_dim == 0 || s->act_dim > 4096 || !s->act_low || !s->act_high)
			return sr__errorf(-EINVAL, "env '%s': box action needs act_dim and bounds",
					  s->id);
		for (uint32_t i = 0; i < s->act_dim; i++)
			if (!(s->act_low[i] <= s->act_high[i]))
				return sr__errorf(-EINVAL,
						  "env '%s': action bound %u: low > high or NaN",
						  s->id, i);
	} else {
		return sr__errorf(-EINVAL, "env '%s': unknown action kind %u", s->id, s->act_kind);
	}
	if (s->n_phys > SR_ENV_MAX_PHYS)
		return sr__errorf(-EINVAL, "env '%s': n_phys %u above %d", s->id, s->n_phys,
				  SR_ENV_MAX_PHYS);
	if (s->n_phys && (!s->get_phys || !s->set_phys))
		return sr__errorf(-EINVAL, "env '%s': n_phys > 0 needs get_phys and set_phys", s->id);
	if (s->abi_version == 1)
		return 0; /* no v2 tail to read */
	if (s->flags & ~SR_ENV_F_KNOWN)
		return sr__errorf(-EINVAL, "env '%s': unknown flags 0x%x", s->id,
				  s->flags & ~SR_ENV_F_KNOWN);
	if ((s->flags & SR_ENV_F_OPAQUE) && (s->flags & SR_ENV_F_FOREIGN))
		return sr__errorf(-EINVAL, "env '%s': SR_ENV_F_OPAQUE and SR_ENV_F_FOREIGN: one "
				  "or the other", s->id);
	if (s->flags & SR_ENV_F_OPAQUE) {
		if (!s->create || !s->destroy || !s->save || !s->load)
			return sr__errorf(-EINVAL,
					  "env '%s': opaque state needs create, destroy, save and "
					  "load",
					  s->id);
		if (s->save_max == 0)
			return sr__errorf(-EINVAL, "env '%s': opaque state needs save_max > 0",
					  s->id);
	} else if (s->create || s->destroy || s->save || s->load || s->save_max) {
		return sr__errorf(-EINVAL,
				  "env '%s': create, destroy, save, load and save_max are for "
				  "opaque state (SR_ENV_F_OPAQUE)",
				  s->id);
	}
	return 0;
}

int sr_env_create_instances(const sr_env_spec *spec, void *states, size_t n)
{
	char *b = states;

	if (!spec || (!states && n))
		return sr__errorf(-EINVAL, "sr_env_create_instances: NULL argument");
	memset(states, 0, n * spec->state_size);
	if (!sr_env_is_opaque(spec))
		return 0;
	for (size_t i = 0; i < n; i++) {
		int err = spec->create(spec, b + i * spec->state_size);
		if (err) {
			while (i--)
				spec->destroy(spec, b + i * spec->state_size);
			return sr__errorf(err < 0 ? err : -ENOMEM,
					  "env '%s': cannot create instance %zu of %zu: %s", spec->id,
					  i, n, sr_strerror(err < 0 ? err : -ENOMEM));
		}
	}
	return 0;
}

void sr_env_destroy_instances(const sr_env_spec *spec, void *states, size_t n)
{
	if (!spec || !states || !sr_env_is_opaque(spec))
		return;
	for (size_t i = 0; i < n; i++)
		spec->destroy(spec, (char *)states + i * spec->state_size);
}

int sr_env_spec_upgrade(const sr_env_spec *in, sr_env_spec *out)
{
	sr_env_spec tmp;
	int err;

	if (!out)
		return sr__errorf(-EINVAL, "sr_env_spec_upgrade: NULL argument");
	err = sr_env_validate(in);
	if (err)
		return err;
	/* Copy only the bytes the spec's version has: a v1 or v2 spec
	 * compiled elsewhere may end where the next tail starts. */
	memset(&tmp, 0, sizeof(tmp));
	memcpy(&tmp, in, in->spec_size);
	tmp.abi_version = SR_ENV_ABI_VERSION;
	tmp.spec_size = sizeof(sr_env_spec);
	*out = tmp;
	return 0;
}

#ifndef SR_HAVE_MUJOCO
/* The MuJoCo env ids (v5, v4) and short names (v5; v4: name_v4), which
 * this build lacks. */
static const char *const mujoco_ids[][2] = {
	{"HalfCheetah", "halfcheetah"},
	{"Hopper", "hopper"},
	{"Walker2d", "walker2d"},
	{"Ant", "ant"},
	{"Humanoid", "humanoid"},
	{"HumanoidStandup", "humanoidstandup"},
	{"InvertedPendulum", "invertedpendulum"},
	{"InvertedDoublePendulum", "inverteddoublependulum"},
	{"Reacher", "reacher"},
	{"Swimmer", "swimmer"},
	{"Pusher", "pusher"},
};
#define N_MUJOCO (sizeof(mujoco_ids) / sizeof(mujoco_ids[0]))

/* Is @name (of @len bytes) a MuJoCo id or short name? */
static bool mujoco_name(const char *name, size_t len)
{
	char buf[64];

	for (size_t i = 0; i < N_MUJOCO; i++)
		for (int v = 4; v <= 5; v++) {
			const char *forms[2] = {buf, NULL};
			char short_buf[64];
			snprintf(buf, sizeof(buf), "%s-v%d", mujoco_ids[i][0], v);
			snprintf(short_buf, sizeof(short_buf), v == 5 ? "%s" : "%s_v4",
				 mujoco_ids[i][1]);
			forms[1] = short_buf;
			for (int f = 0; f < 2; f++)
				if (strlen(forms[f]) == len && !strncmp(forms[f], name, len))
					return true;
		}
	return false;
}
#endif

/* The message lists every env by id and short name, the MuJoCo family in
 * one line (22 ids would not fit the message). */
static int list_known(int err, const char *name, size_t len)
{
	char buf[1024];
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < N_BUILTIN && off < sizeof(buf); i++) {
#ifdef SR_HAVE_MUJOCO
		if (sr__is_mujoco(builtin[i]))
			continue;
#endif
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%s (%s)", i ? ", " : "",
					builtin[i]->id, builtin[i]->name);
	}
#ifdef SR_HAVE_MUJOCO
	if (off < sizeof(buf))
		snprintf(buf + off, sizeof(buf) - off, "; MuJoCo, as <Name>-v5 or -v4 "
			 "(short names name, name_v4): HalfCheetah, Hopper, Walker2d, Ant, Humanoid, "
			 "HumanoidStandup, InvertedPendulum, InvertedDoublePendulum, Reacher, "
			 "Swimmer, Pusher");
#endif
	return sr__errorf(err, "unknown env '%.*s'; known: %s", (int)(len > 200 ? 200 : len), name,
			  buf);
}

#ifndef SR_HAVE_BOX2D
/* Envs this build lacks because Box2D was not found. */
static const char *const box2d_names[] = {"LunarLander-v3",	      "lunarlander",
					  "LunarLanderContinuous-v3", "lunarlander_continuous",
					  "BipedalWalker-v3",	      "bipedalwalker"};
#endif

int sr_env_find(const char *name, sr_env_spec *out)
{
	const char *colon;
	size_t base_len;

	if (!name || !out)
		return sr__errorf(-EINVAL, "sr_env_find: NULL argument");
	colon = strchr(name, ':');
	base_len = colon ? (size_t)(colon - name) : strlen(name);
	for (size_t i = 0; i < N_BUILTIN; i++) {
		const sr_env_spec *s = builtin[i];
		if ((strlen(s->id) == base_len && !strncmp(s->id, name, base_len)) ||
		    (strlen(s->name) == base_len && !strncmp(s->name, name, base_len))) {
			*out = *s;
			if (colon)
				return sr__env_configure(out, colon + 1);
			return 0;
		}
	}
#ifndef SR_HAVE_BOX2D
	for (size_t i = 0; i < sizeof(box2d_names) / sizeof(box2d_names[0]); i++)
		if (strlen(box2d_names[i]) == base_len && !strncmp(box2d_names[i], name, base_len))
			return sr__errorf(-ENOTSUP,
					  "env '%.*s' needs Box2D: this stepring was built without "
					  "Box2D (install libbox2d-dev and rebuild)",
					  (int)base_len, name);
#endif
#ifndef SR_HAVE_MUJOCO
	if (mujoco_name(name, base_len))
		return sr__errorf(-ENOTSUP,
				  "env '%.*s' needs MuJoCo: this stepring was built without "
				  "MuJoCo (install libmujoco-dev 2.2.2 and rebuild)",
				  (int)base_len, name);
#endif
	return list_known(-ENOENT, name, base_len);
}

int sr_env_load_plugin(const char *path, sr_env_spec *out)
{
	const sr_env_spec *s;
	void *h;
	int err;

	if (!path || !out)
		return sr__errorf(-EINVAL, "sr_env_load_plugin: NULL argument");
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return sr__errorf(-ENOENT, "cannot load env plugin '%s': %s", path, dlerror());
	s = dlsym(h, SR_ENV_PLUGIN_SYMBOL);
	if (!s) {
		dlclose(h);
		return sr__errorf(-ENOENT, "env plugin '%s' does not export '%s'", path,
				  SR_ENV_PLUGIN_SYMBOL);
	}
	/* Read abi_version first: it is the one field every ABI version keeps. */
	if (s->abi_version < SR_ENV_ABI_VERSION_MIN || s->abi_version > SR_ENV_ABI_VERSION) {
		err = sr__errorf(-EPROTO,
				 "env plugin '%s' was built for env ABI version %u, this stepring "
				 "expects version %u (version 2 and version %u still load): "
				 "rebuild it against this stepring",
				 path, s->abi_version, SR_ENV_ABI_VERSION, SR_ENV_ABI_VERSION_MIN);
		dlclose(h);
		return err;
	}
	/* The library stays loaded: the spec's pointers live in it. */
	err = sr_env_spec_upgrade(s, out);
	if (err)
		dlclose(h);
	return err;
}

volatile double sr__pow_two = 2.0;

const struct sr__reset_opt *sr__env_reset_opt(const sr_env_spec *spec)
{
	static const struct {
		const sr_env_spec *env;
		const struct sr__reset_opt *opt;
	} table[] = {
		{&sr__env_cartpole, &sr__cartpole_reset_opt},
		{&sr__env_acrobot, &sr__acrobot_reset_opt},
		{&sr__env_mountaincar, &sr__mountaincar_reset_opt},
		{&sr__env_mountaincar_continuous, &sr__mountaincar_reset_opt},
		{&sr__env_pendulum, &sr__pendulum_reset_opt},
	};

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (spec->reset == table[i].env->reset)
			return table[i].opt;
	return NULL;
}

int sr__env_parse_reset_opts(const sr_env_spec *spec, const struct sr__reset_opt *ro,
			     const char *options, double b[2])
{
	bool seen[2] = {false, false};
	const char *s = options;

	b[0] = ro->defaults[0];
	b[1] = ro->defaults[1];
	while (*s) {
		const char *eq = strchr(s, '='), *end;
		char *num_end;
		size_t klen;
		int k;
		double v;

		if (!eq)
			return sr__errorf(-EINVAL, "env '%s': reset option '%s' has no '=value'",
					  spec->id, s);
		klen = (size_t)(eq - s);
		for (k = 0; k < 2; k++)
			if (strlen(ro->keys[k]) == klen && !strncmp(ro->keys[k], s, klen))
				break;
		if (k == 2)
			return sr__errorf(-EINVAL, "env '%s': unknown reset option '%.*s' (it takes "
					  "'%s' and '%s')", spec->id, (int)(klen > 64 ? 64 : klen), s,
					  ro->keys[0], ro->keys[1]);
		if (seen[k])
			return sr__errorf(-EINVAL, "env '%s': reset option '%s' given twice",
					  spec->id, ro->keys[k]);
		seen[k] = true;
		v = strtod(eq + 1, &num_end);
		end = strchr(eq + 1, ',');
		if (!end)
			end = eq + 1 + strlen(eq + 1);
		if (num_end == eq + 1 || num_end != end || !isfinite(v))
			return sr__errorf(-EINVAL, "env '%s': reset option '%s' must be a finite "
					  "number", spec->id, ro->keys[k]);
		b[k] = v;
		s = *end ? end + 1 : end;
	}
	if (ro->ordered && b[0] > b[1])
		return sr__errorf(-EINVAL, "env '%s': reset option %s (%g) must be <= %s (%g)",
				  spec->id, ro->keys[0], b[0], ro->keys[1], b[1]);
	return 0;
}

int sr__rng_param(sr_env_spec *spec, const char *val)
{
	if (!strcmp(val, "stepring"))
		spec->params[SR__P_RNG] = 0;
	else if (!strcmp(val, "numpy"))
		spec->params[SR__P_RNG] = 1;
	else
		return sr__errorf(-EINVAL, "env '%s': rng='%.64s' (stepring or numpy)", spec->id,
				  val);
	return 0;
}

const struct sr__params *sr__env_params(const sr_env_spec *spec)
{
	static const struct {
		const sr_env_spec *env;
		const struct sr__params *params;
	} table[] = {
		{&sr__env_cartpole, &sr__cartpole_params},
		{&sr__env_pendulum, &sr__pendulum_params},
		{&sr__env_mountaincar, &sr__mountaincar_params},
		{&sr__env_mountaincar_continuous, &sr__mountaincar_continuous_params},
		{&sr__env_acrobot, &sr__acrobot_params},
#ifdef SR_HAVE_BOX2D
		{&sr__env_lunarlander, &sr__lunar_params},
		{&sr__env_lunarlander_continuous, &sr__lunar_params},
		{&sr__env_bipedalwalker, &sr__biped_params},
#endif
	};

	if (!spec)
		return NULL;
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (spec->step == table[i].env->step)
			return table[i].params;
	return NULL;
}

static double param_value(const sr_env_spec *spec, const struct sr__param *p)
{
	double v;

	switch (p->kind) {
	case SR__PK_XOR:
		return sr__pget(spec, p->slot, p->def);
	case SR__PK_RAW:
		memcpy(&v, &spec->params[p->slot], sizeof(v));
		return v;
	case SR__PK_BOOL:
		return spec->params[p->slot] ? 1.0 : 0.0;
	default:
		return p->def;
	}
}

static void param_store(sr_env_spec *spec, const struct sr__param *p, double v)
{
	uint64_t b, d;

	switch (p->kind) {
	case SR__PK_XOR:
		memcpy(&b, &v, sizeof(b));
		memcpy(&d, &p->def, sizeof(d));
		spec->params[p->slot] = b ^ d;
		break;
	case SR__PK_RAW:
		memcpy(&b, &v, sizeof(b));
		spec->params[p->slot] = b;
		break;
	case SR__PK_BOOL:
		spec->params[p->slot] = v != 0;
		break;
	default:
		break;
	}
}

static void param_out(const sr_env_spec *spec, const struct sr__param *p, sr_env_param *out)
{
	memset(out, 0, sizeof(*out));
	out->name = p->name;
	out->value = param_value(spec, p);
	out->flags = p->flags | (p->kind == SR__PK_BOOL ? SR_ENV_PARAM_BOOL : 0);
	out->note = p->note;
}

int sr_env_param_at(const sr_env_spec *spec, size_t i, sr_env_param *out)
{
	const struct sr__params *t;

	if (!spec || !out)
		return sr__errorf(-EINVAL, "sr_env_param_at: NULL argument");
	t = sr__env_params(spec);
	if (!t || i >= t->n)
		return -ENOENT; /* the end of the list: no message */
	param_out(spec, &t->v[i], out);
	return 0;
}

/* "a, b, c" of @t's names (for messages). */
static const char *param_names(const struct sr__params *t, char *buf, size_t cap)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; t && i < t->n && off < cap; i++)
		off += (size_t)snprintf(buf + off, cap - off, "%s%s", i ? ", " : "", t->v[i].name);
	return t && t->n ? buf : "none";
}

static const struct sr__param *param_lookup(const struct sr__params *t, const char *name,
					    size_t len)
{
	for (size_t i = 0; t && i < t->n; i++)
		if (strlen(t->v[i].name) == len && !strncmp(t->v[i].name, name, len))
			return &t->v[i];
	return NULL;
}

int sr_env_param_find(const sr_env_spec *spec, const char *name, sr_env_param *out)
{
	const struct sr__params *t;
	const struct sr__param *p;
	char buf[512];

	if (!spec || !name || !out)
		return sr__errorf(-EINVAL, "sr_env_param_find: NULL argument");
	t = sr__env_params(spec);
	p = param_lookup(t, name, strlen(name));
	if (!p)
		return sr__errorf(-ENOENT, "env '%s' has no parameter '%.64s' (its parameters: %s)",
				  spec->id, name, param_names(t, buf, sizeof(buf)));
	param_out(spec, p, out);
	return 0;
}

/* One "value" of parameter @p: a finite number, or for a bool 0/1,
 * true/false. */
static int param_parse(const sr_env_spec *spec, const struct sr__param *p, const char *val,
		       size_t len, double *out)
{
	char buf[64], *end;
	double v;

	if (len == 0 || len >= sizeof(buf))
		return sr__errorf(-EINVAL, "env '%s': parameter %s needs a value", spec->id,
				  p->name);
	memcpy(buf, val, len);
	buf[len] = '\0';
	if (p->kind == SR__PK_BOOL) {
		if (!strcmp(buf, "1") || !strcmp(buf, "true") || !strcmp(buf, "True"))
			*out = 1.0;
		else if (!strcmp(buf, "0") || !strcmp(buf, "false") || !strcmp(buf, "False"))
			*out = 0.0;
		else
			return sr__errorf(-EINVAL, "env '%s': parameter %s is a bool (0 or 1), not "
					  "'%s'", spec->id, p->name, buf);
		return 0;
	}
	v = strtod(buf, &end);
	if (end == buf || *end || !isfinite(v))
		return sr__errorf(-EINVAL, "env '%s': parameter %s must be a finite number, not "
				  "'%s'", spec->id, p->name, buf);
	*out = v;
	return 0;
}

int sr__env_set_params(sr_env_spec *spec, const char *params, bool live)
{
	const struct sr__params *t = sr__env_params(spec);
	const char *s = params;
	sr_env_spec tmp = *spec;
	bool seen_rng = false;
	char names[512];

	while (*s) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		const char *eq = memchr(s, '=', len);
		size_t klen = eq ? (size_t)(eq - s) : len;
		const struct sr__param *p;
		double v = 0;
		int err;

		if (!eq)
			return sr__errorf(-EINVAL, "env '%s': parameter '%.*s' has no '=value'",
					  spec->id, (int)(len > 64 ? 64 : len), s);
		if (!live && klen == 3 && !strncmp(s, "rng", 3)) {
			char val[16];

			if (seen_rng)
				return sr__errorf(-EINVAL, "env '%s': rng given twice", spec->id);
			seen_rng = true;
			if (len - 4 >= sizeof(val))
				return sr__errorf(-EINVAL, "env '%s': rng='%.*s' (stepring or numpy)",
						  spec->id, (int)(len - 4 > 64 ? 64 : len - 4), s + 4);
			memcpy(val, s + 4, len - 4);
			val[len - 4] = '\0';
			err = sr__rng_param(&tmp, val);
			if (err)
				return err;
			s = end ? end + 1 : s + len;
			continue;
		}
		if (live && klen == 3 && !strncmp(s, "rng", 3))
			return sr__errorf(-EINVAL, "env '%s': rng cannot change on a live pool (it "
					  "is chosen when the pool is made)", spec->id);
		p = param_lookup(t, s, klen);
		if (!p)
			return sr__errorf(-EINVAL, "env '%s': unknown parameter '%.*s' (it takes %s%s)",
					  spec->id, (int)(klen > 64 ? 64 : klen), s,
					  live ? "" : "rng=stepring|numpy, ",
					  param_names(t, names, sizeof(names)));
		if (!(p->flags & (live ? SR_ENV_PARAM_LIVE : SR_ENV_PARAM_CREATE)))
			return sr__errorf(-EINVAL, "env '%s': parameter %s cannot be set%s: %s",
					  spec->id, p->name,
					  live && (p->flags & SR_ENV_PARAM_CREATE) ?
						  " on a live pool (only when the pool is made)" : "",
					  p->note ? p->note : "it is compiled in");
		err = param_parse(spec, p, eq + 1, len - klen - 1, &v);
		if (err)
			return err;
		param_store(&tmp, p, v);
		s = end ? end + 1 : s + len;
	}
	memcpy(spec->params, tmp.params, sizeof(spec->params));
	return 0;
}

int sr__rng_configure(sr_env_spec *spec, const char *params)
{
	return sr__env_set_params(spec, params, false);
}

int sr__env_configure(sr_env_spec *spec, const char *params)
{
	/* The classic-control envs: their RNG and their parameters. */
	if (spec->reset == sr__env_cartpole.reset || spec->reset == sr__env_pendulum.reset ||
	    spec->reset == sr__env_mountaincar.reset || spec->reset == sr__env_acrobot.reset)
		return sr__rng_configure(spec, params);
#ifdef SR_HAVE_MUJOCO
	if (sr__is_mujoco(spec))
		return sr__mujoco_configure(spec, params);
#endif
	if (!strcmp(spec->name, "spin"))
		return sr__spin_configure(spec, params);
#ifdef SR_HAVE_BOX2D
	if (!strncmp(spec->name, "lunarlander", 11))
		return sr__lunar_configure(spec, params);
	if (!strcmp(spec->name, "bipedalwalker"))
		return sr__biped_configure(spec, params);
#endif
	return sr__errorf(-EINVAL, "env '%s' takes no parameters (got '%.64s')", spec->id, params);
}
