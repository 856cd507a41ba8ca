#!/usr/bin/env python3
"""Reference episodes of Gymnasium's MuJoCo envs made with constructor
arguments, in the MuJoCo reference kit's CSV format (its gen_ref.py writes
them; this script passes gymnasium.make the arguments of a stepring
parameter string):

    /usr/bin/python3 tools/mujoco_ref.py --kit ../shared/mujoco \\
        --env "Hopper-v5:ctrl_cost_weight=0.01,healthy_z_range=0.6:inf,frame_skip=5" \\
        --policy random --seed 7 --episodes 2 --max-steps 25 --out-dir OUT

The value syntax is stepring's (envs/mujoco/mj_params.c): a range is
low:high, flags 0/1, frame_skip an integer, main_body an integer id or a
body name, xml_file a model name. Needs the kit (its `mujoco` stand-in on
libmujoco 2.2.2) and Gymnasium 1.3.0 (the kit finds it). Each file's name is
<id>__<tag>__<policy>__seeds<a>-<b>.csv.gz with --tag (default p0, p1, ...
by --env order); --list appends to <out-dir>/params.txt a line per file:
"FILE TIME_LIMIT ENV" (the env string has no spaces).
"""
import argparse
import os
import sys

INT_KEYS = {"frame_skip"}
FLAG_KEYS = {"terminate_when_unhealthy", "exclude_current_positions_from_observation",
             "include_cinert_in_observation", "include_cvel_in_observation",
             "include_qfrc_actuator_in_observation", "include_cfrc_ext_in_observation",
             "use_contact_forces"}
STR_KEYS = {"xml_file"}


def kwargs_of(params):
    out = {}
    for item in filter(None, params.split(",")):
        key, val = item.split("=", 1)
        if key in INT_KEYS:
            out[key] = int(val)
        elif key in FLAG_KEYS:
            out[key] = val in ("1", "true", "True")
        elif key in STR_KEYS:
            out[key] = val
        elif key == "main_body":
            out[key] = int(val) if val.lstrip("-").isdigit() else val
        elif key == "rng":
            continue  # stepring's own: Gymnasium always draws with NumPy
        elif ":" in val:
            lo, hi = val.split(":", 1)
            out[key] = (float(lo), float(hi))
        else:
            out[key] = float(val)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kit", required=True, help="the MuJoCo reference kit's folder")
    ap.add_argument("--env", action="append", required=True, help="ID[:key=value,...]")
    ap.add_argument("--tag", action="append", help="file tag per --env (default p<i>)")
    ap.add_argument("--policy", default="random")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()

    kit = os.path.abspath(args.kit)
    sys.path.insert(0, kit)
    import gen_ref  # the kit's recorder
    gen_ref.setup_paths()
    import gymnasium as gym

    os.makedirs(args.out_dir, exist_ok=True)
    rows = []
    for i, full in enumerate(args.env):
        env_id, _, params = full.partition(":")
        kw = kwargs_of(params)
        tag = args.tag[i] if args.tag and i < len(args.tag) else "p%d" % i

        def make_env(eid, max_steps=None, _kw=kw):
            limit = gym.spec(eid).max_episode_steps
            if max_steps is not None and (limit is None or max_steps < limit):
                return gym.make(eid, max_episode_steps=max_steps, **_kw), max_steps
            return gym.make(eid, **_kw), limit

        gen_ref.make_env = make_env
        name, _, _, limit = gen_ref.record(env_id, args.policy, args.seed, args.episodes,
                                           args.max_steps, args.out_dir)
        final = name.replace("__%s__" % args.policy, "__%s__%s__" % (tag, args.policy))
        os.replace(os.path.join(args.out_dir, name), os.path.join(args.out_dir, final))
        rows.append((final, full, limit))
        print(final, full, limit)
    if args.list:
        with open(os.path.join(args.out_dir, "params.txt"), "a") as f:
            for final, full, limit in rows:
                f.write("%s %d %s\n" % (final, limit, full))
    return 0


if __name__ == "__main__":
    sys.exit(main())
