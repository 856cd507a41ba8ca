/* Built-in env types (internal). Add an env: define its spec in
 * envs/<name>.c and list it in SR_BUILTIN_ENVS. */
#ifndef SR_ENVS_H
#define SR_ENVS_H

#include "stepring/env.h"

#define SR_BUILTIN_ENVS(X) X(sr__env_cartpole)

extern const sr_env_spec sr__env_cartpole;

/* Apply "key=value,..." parameters to a copy of a spec (spin); -EINVAL for
 * an env that takes none or a bad key. */
int sr__env_configure(sr_env_spec *spec, const char *params);

#endif
