#!/usr/bin/env python3
"""PPO on CartPole-v1 with stepring as the env backend.

    STEPRING_LIB=build/libstepring.so python3 examples/ppo_cartpole.py

Trains a small actor-critic (two 64x64 tanh MLPs, torch on the CPU) on
stepring.make_vec("CartPole-v1", 8, mode="sync", autoreset_mode="same_step")
and stops when a greedy evaluation over 20 episodes (on a second stepring
vector env) reaches --target (475), or at --total-steps. Prints the env
steps per second of the whole training (env stepping, inference and
updates) and the final evaluation. Everything is seeded (torch, the env
pool, the minibatch order): the same command gives the same run.

Hyperparameters are those of the RL Baselines3 Zoo for PPO on CartPole-v1
(8 envs x 32 steps, 20 epochs, gamma 0.98, GAE lambda 0.8, linearly
annealed learning rate 1e-3 and clip range 0.2).

Same-step autoreset: when an episode ends, step() already returns the
first obs of the next one and info["final_obs"] holds the last obs of the
finished episode; a time-limit truncation is bootstrapped from the value
of that final obs.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import stepring  # noqa: E402


def layer(i, o, std=np.sqrt(2)):
    lin = nn.Linear(i, o)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.zeros_(lin.bias)
    return lin


class Agent(nn.Module):
    def __init__(self, obs_dim, n_actions, hidden=64):
        super().__init__()
        self.critic = nn.Sequential(layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden),
                                    nn.Tanh(), layer(hidden, 1, 1.0))
        self.actor = nn.Sequential(layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden),
                                   nn.Tanh(), layer(hidden, n_actions, 0.01))

    def value(self, x):
        return self.critic(x).squeeze(-1)

    def dist(self, x):
        return torch.distributions.Categorical(logits=self.actor(x))


def evaluate(agent, env_id, episodes, seed, num_threads=None):
    """Mean and list of the returns of @episodes greedy episodes (one per
    env of a fresh stepring vector env, the first episode of each)."""
    returns = np.zeros(episodes)
    done = np.zeros(episodes, dtype=bool)
    with stepring.make_vec(env_id, episodes, seed=seed, num_threads=num_threads) as envs:
        obs, _ = envs.reset(seed=seed)
        while not done.all():
            with torch.no_grad():
                a = agent.actor(torch.tensor(obs)).argmax(-1).numpy().astype(np.int32)
            obs, r, term, trunc, _ = envs.step(a)
            returns += np.where(done, 0.0, r)
            done |= term | trunc
    return float(returns.mean()), returns


def train(args, log=print):
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.torch_threads)
    gen = np.random.default_rng(args.seed)
    n, t_steps = args.num_envs, args.num_steps
    batch = n * t_steps
    envs = stepring.make_vec(args.env, n, mode="sync", seed=args.seed,
                             autoreset_mode="same_step", num_threads=args.env_threads)
    obs_dim = envs.single_observation_space.shape[0]
    n_act = int(envs.single_action_space.n)
    agent = Agent(obs_dim, n_act)
    opt = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)

    b_obs = torch.zeros(t_steps, n, obs_dim)
    b_act = torch.zeros(t_steps, n, dtype=torch.long)
    b_logp = torch.zeros(t_steps, n)
    b_rew = torch.zeros(t_steps, n)
    b_done = torch.zeros(t_steps, n)      # episode ended at this step (term or trunc)
    b_val = torch.zeros(t_steps, n)
    b_boot = torch.zeros(t_steps, n)      # gamma * V(final obs) added on truncation

    obs_np, _ = envs.reset(seed=args.seed)
    obs = torch.tensor(obs_np)            # copy: the view is only valid until the next step
    ep_ret = np.zeros(n)
    ep_len = np.zeros(n, dtype=np.int64)
    recent = []
    steps = 0
    t_env = 0.0
    n_updates = max(1, args.total_steps // batch)
    t0 = time.perf_counter()
    eval_mean, eval_returns, solved_at = None, None, None
    for update in range(n_updates):
        frac = 1.0 - update / n_updates
        for g in opt.param_groups:
            g["lr"] = frac * args.lr
        clip = frac * args.clip
        for t in range(t_steps):
            with torch.no_grad():
                d = agent.dist(obs)
                a = d.sample()
                b_logp[t] = d.log_prob(a)
                b_val[t] = agent.value(obs)
            b_obs[t] = obs
            b_act[t] = a
            te = time.perf_counter()
            o, r, term, trunc, info = envs.step(a.numpy().astype(np.int32))
            t_env += time.perf_counter() - te
            steps += n
            b_rew[t] = torch.tensor(r)  # the views are read-only: copy
            done = term | trunc
            b_done[t] = torch.from_numpy(done.astype(np.float32))
            b_boot[t] = 0.0
            if trunc.any():
                # Bootstrap time-limit ends from V(final obs), not from the
                # next episode's first obs.
                idx = np.nonzero(trunc & ~term)[0]
                if idx.size:
                    fo = torch.tensor(np.stack(info["final_obs"][idx]))
                    with torch.no_grad():
                        b_boot[t, idx] = args.gamma * agent.value(fo)
            ep_ret += r
            ep_len += 1
            for i in np.nonzero(done)[0]:
                recent.append(ep_ret[i])
                ep_ret[i] = 0.0
                ep_len[i] = 0
            obs = torch.tensor(o)
        # GAE(lambda).
        with torch.no_grad():
            next_val = agent.value(obs)
            adv = torch.zeros(t_steps, n)
            last = torch.zeros(n)
            for t in reversed(range(t_steps)):
                nv = next_val if t == t_steps - 1 else b_val[t + 1]
                nonterm = 1.0 - b_done[t]
                delta = b_rew[t] + b_boot[t] + args.gamma * nv * nonterm - b_val[t]
                last = delta + args.gamma * args.gae_lambda * nonterm * last
                adv[t] = last
            ret = adv + b_val
        f_obs, f_act, f_logp = b_obs.reshape(batch, -1), b_act.reshape(-1), b_logp.reshape(-1)
        f_adv, f_ret = adv.reshape(-1), ret.reshape(-1)
        mb = batch // args.minibatches
        for _ in range(args.epochs):
            perm = torch.from_numpy(gen.permutation(batch))
            for k in range(args.minibatches):
                i = perm[k * mb:(k + 1) * mb]
                d = agent.dist(f_obs[i])
                logp = d.log_prob(f_act[i])
                ratio = (logp - f_logp[i]).exp()
                a_ = f_adv[i]
                a_ = (a_ - a_.mean()) / (a_.std() + 1e-8)
                pg = torch.max(-a_ * ratio, -a_ * ratio.clamp(1 - clip, 1 + clip)).mean()
                v_loss = 0.5 * (agent.value(f_obs[i]) - f_ret[i]).pow(2).mean()
                loss = pg + args.vf_coef * v_loss - args.ent_coef * d.entropy().mean()
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                opt.step()
        if (update + 1) % args.log_every == 0:
            last100 = np.mean(recent[-100:]) if recent else float("nan")
            log("update %4d  steps %7d  episodes %5d  mean return (last 100) %6.1f  %.0f steps/s"
                % (update + 1, steps, len(recent), last100, steps / (time.perf_counter() - t0)))
        if args.eval_every and (update + 1) % args.eval_every == 0 and recent and \
                np.mean(recent[-20:]) >= args.target:
            m, rs = evaluate(agent, args.env, args.eval_episodes, args.seed + 1000,
                             args.env_threads)
            log("  eval at %d steps: mean return %.1f over %d episodes"
                % (steps, m, args.eval_episodes))
            if m >= args.target:
                eval_mean, eval_returns, solved_at = m, rs, steps
                break
    wall = time.perf_counter() - t0
    envs.close()
    if eval_mean is None:
        eval_mean, eval_returns = evaluate(agent, args.env, args.eval_episodes,
                                           args.seed + 1000, args.env_threads)
    return {"steps": steps, "seconds": wall, "steps_per_s": steps / wall,
            "env_seconds": t_env, "eval_mean": eval_mean, "eval_returns": eval_returns,
            "solved_at": solved_at, "episodes": len(recent), "agent": agent}


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--num-steps", type=int, default=32, help="rollout length per env")
    p.add_argument("--total-steps", type=int, default=200_000, help="env step budget")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--gamma", type=float, default=0.98)
    p.add_argument("--gae-lambda", type=float, default=0.8)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--minibatches", type=int, default=1)
    p.add_argument("--ent-coef", type=float, default=0.0)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--target", type=float, default=475.0,
                   help="stop when the greedy eval mean return reaches this")
    p.add_argument("--eval-episodes", type=int, default=20)
    p.add_argument("--eval-every", type=int, default=10,
                   help="updates between evals (once the last 20 episodes reach the target);"
                        " 0: only at the end")
    p.add_argument("--log-every", type=int, default=25)
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--env-threads", type=int, default=1,
                   help="stepring worker threads (8 CartPoles need no more than one)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    print("stepring %s (%s), torch %s, %d envs, seed %d"
          % (stepring.version(), stepring.library_path, torch.__version__, args.num_envs,
             args.seed))
    r = train(args)
    print("training: %d env steps in %.1f s = %.0f steps/s (env stepping %.1f s)"
          % (r["steps"], r["seconds"], r["steps_per_s"], r["env_seconds"]))
    print("evaluation: mean return %.1f over %d greedy episodes (min %.0f, max %.0f)%s"
          % (r["eval_mean"], args.eval_episodes, r["eval_returns"].min(),
             r["eval_returns"].max(), "" if r["eval_mean"] >= args.target else
             "  [below target %.0f]" % args.target))
    return 0 if r["eval_mean"] >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
