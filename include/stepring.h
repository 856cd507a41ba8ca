/* stepring: parallel RL environment stepping with a shared-memory replay ring.
 * Umbrella header: include this, link -lstepring (pkg-config stepring). */
#ifndef STEPRING_H
#define STEPRING_H

#include "stepring/common.h"
#include "stepring/env.h"
#include "stepring/ring.h"
#include "stepring/replay.h"
#include "stepring/pool.h"
#include "stepring/device.h"
#include "stepring/checkpoint.h"
#include "stepring/stats.h"

#endif
