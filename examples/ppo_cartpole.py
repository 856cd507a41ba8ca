#!/usr/bin/env python3
"""PPO on CartPole-v1 through Gymnasium's vector API, with stepring as the env backend.

    STEPRING_LIB=build/libstepring.so PYTHONPATH=../shared/thirdparty/python \
        python3 examples/ppo_cartpole.py            # stepring
    ... python3 examples/ppo_cartpole.py --twin     # Gymnasium's SyncVectorEnv

The trainer is written for Gymnasium: the envs come from
gymnasium.make_vec("stepring/CartPole-v1", ...) (registered by `import
stepring`), wrapped in Gymnasium's own vector wrappers
(RecordEpisodeStatistics for the returns, TransformReward), with
Gymnasium's default next-step autoreset. --twin runs the same trainer on
gymnasium.vector.SyncVectorEnv of Gymnasium's CartPole: the only difference
is the one line in make_envs(). It trains a small actor-critic (two 64x64
tanh MLPs, torch on the CPU) and stops when a greedy evaluation over 20
episodes reaches --target (475), or at --total-steps, then prints the env
steps per second of the whole training (env stepping, inference and
updates). Everything is seeded (torch, the envs, the minibatch order).

Hyperparameters are those of the RL Baselines3 Zoo for PPO on CartPole-v1
(8 envs x 32 steps, 20 epochs, gamma 0.98, GAE lambda 0.8, linearly
annealed learning rate 1e-3 and clip range 0.2).

Next-step autoreset: the obs returned with terminated or truncated is the
episode's last obs (so a time-limit truncation is bootstrapped from its
value), and the step after it only resets that env (reward 0, its action
ignored): that row is left out of the loss.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import gymnasium as gym  # noqa: E402
import stepring  # noqa: E402,F401  (registers stepring/<id> with Gymnasium)
from gymnasium.wrappers import vector as W  # noqa: E402


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


def make_envs(args, n, seed):
    """The vector env: the one line that differs between the twins."""
    if args.twin:
        envs = gym.make_vec(args.env, num_envs=n, vectorization_mode="sync")
    else:
        envs = gym.make_vec("stepring/" + args.env, num_envs=n, seed=seed)
    return envs


def evaluate(agent, args, episodes, seed):
    """Mean and list of the returns of @episodes greedy episodes (the first
    episode of each env of a fresh vector env)."""
    envs = make_envs(args, episodes, seed)
    returns = np.zeros(episodes)
    done = np.zeros(episodes, dtype=bool)
    obs, _ = envs.reset(seed=seed)
    while not done.all():
        with torch.no_grad():
            a = agent.actor(torch.from_numpy(obs)).argmax(-1).numpy()
        obs, r, term, trunc, _ = envs.step(a)
        returns += np.where(done, 0.0, r)
        done |= term | trunc
    envs.close()
    return float(returns.mean()), returns


def train(args, log=print):
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.torch_threads)
    gen = np.random.default_rng(args.seed)
    n, t_steps = args.num_envs, args.num_steps
    batch = n * t_steps
    stats = W.RecordEpisodeStatistics(make_envs(args, n, args.seed), buffer_length=100)
    envs = W.TransformReward(stats, lambda r: r.astype(np.float32))
    obs_dim = envs.single_observation_space.shape[0]
    n_act = int(envs.single_action_space.n)
    agent = Agent(obs_dim, n_act)
    opt = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)

    b_obs = torch.zeros(t_steps, n, obs_dim)
    b_act = torch.zeros(t_steps, n, dtype=torch.long)
    b_logp = torch.zeros(t_steps, n)
    b_rew = torch.zeros(t_steps, n)
    b_term = torch.zeros(t_steps, n)   # terminated at this step: no bootstrap
    b_done = torch.zeros(t_steps, n)   # the episode ended at this step
    b_valid = torch.zeros(t_steps, n)  # 0: an autoreset row (no transition)
    b_val = torch.zeros(t_steps, n)

    obs_np, _ = envs.reset(seed=args.seed)
    obs = torch.from_numpy(obs_np)     # the binding's arrays are ours (copy=True)
    ended = np.zeros(n, dtype=bool)    # next step is an autoreset step
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
            b_valid[t] = torch.from_numpy((~ended).astype(np.float32))
            te = time.perf_counter()
            o, r, term, trunc, info = envs.step(a.numpy())
            t_env += time.perf_counter() - te
            steps += n
            b_rew[t] = torch.from_numpy(r)
            b_term[t] = torch.from_numpy(term.astype(np.float32))
            ended = term | trunc
            b_done[t] = torch.from_numpy(ended.astype(np.float32))
            obs = torch.from_numpy(o)
        # GAE(lambda). Row t's next obs is row t + 1's (the episode's last
        # obs when row t ended it: truncations bootstrap from its value).
        with torch.no_grad():
            next_val = agent.value(obs)
            adv = torch.zeros(t_steps, n)
            last = torch.zeros(n)
            for t in reversed(range(t_steps)):
                nv = next_val if t == t_steps - 1 else b_val[t + 1]
                delta = b_rew[t] + args.gamma * nv * (1.0 - b_term[t]) - b_val[t]
                last = delta + args.gamma * args.gae_lambda * (1.0 - b_done[t]) * last
                adv[t] = last
            ret = adv + b_val
        valid = b_valid.reshape(-1) > 0
        f_obs, f_act, f_logp = (b_obs.reshape(batch, -1)[valid], b_act.reshape(-1)[valid],
                                b_logp.reshape(-1)[valid])
        f_adv, f_ret = adv.reshape(-1)[valid], ret.reshape(-1)[valid]
        m = int(valid.sum())
        mb = max(1, m // args.minibatches)
        for _ in range(args.epochs):
            perm = torch.from_numpy(gen.permutation(m))
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
        recent = list(stats.return_queue)
        if (update + 1) % args.log_every == 0:
            last100 = np.mean(recent) if recent else float("nan")
            log("update %4d  steps %7d  episodes %5d  mean return (last 100) %6.1f  %.0f steps/s"
                % (update + 1, steps, stats.episode_count, last100,
                   steps / (time.perf_counter() - t0)))
        if args.eval_every and (update + 1) % args.eval_every == 0 and recent and \
                np.mean(recent[-20:]) >= args.target:
            m_, rs = evaluate(agent, args, args.eval_episodes, args.seed + 1000)
            log("  eval at %d steps: mean return %.1f over %d episodes"
                % (steps, m_, args.eval_episodes))
            if m_ >= args.target:
                eval_mean, eval_returns, solved_at = m_, rs, steps
                break
    wall = time.perf_counter() - t0
    episodes = int(stats.episode_count)
    envs.close()
    if eval_mean is None:
        eval_mean, eval_returns = evaluate(agent, args, args.eval_episodes, args.seed + 1000)
    return {"steps": steps, "seconds": wall, "steps_per_s": steps / wall,
            "env_seconds": t_env, "eval_mean": eval_mean, "eval_returns": eval_returns,
            "solved_at": solved_at, "episodes": episodes, "agent": agent}


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
    p.add_argument("--twin", action="store_true",
                   help="run on gymnasium.vector.SyncVectorEnv of Gymnasium's env instead")
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    print("%s, gymnasium %s, torch %s, %d envs, seed %d"
          % ("SyncVectorEnv (twin)" if args.twin else "stepring %s (%s)" % (
              stepring.version(), stepring.library_path), gym.__version__,
             torch.__version__, args.num_envs, args.seed))
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
