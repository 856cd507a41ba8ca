#!/usr/bin/env bash
# Remake the reference episodes of this folder (Gymnasium 1.3.0's MuJoCo envs
# with constructor arguments, on libmujoco 2.2.2 through the MuJoCo reference
# kit): tests/refdata/mujoco/make.sh KIT_DIR  (from the repository's root).
# Two episodes of at most 25 steps per env id (10 for the humanoids: 376
# obs a row), the random policy, seeds 7-8.
set -euo pipefail
KIT=${1:?usage: make.sh KIT_DIR}
OUT=$(dirname "$0")
rm -f "$OUT"/*.csv.gz "$OUT"/params.txt
envs=(
	"HalfCheetah-v5:forward_reward_weight=2,ctrl_cost_weight=0.3,reset_noise_scale=0.2,exclude_current_positions_from_observation=0,frame_skip=3"
	"HalfCheetah-v4:forward_reward_weight=0.5,ctrl_cost_weight=0.05,reset_noise_scale=0.05,exclude_current_positions_from_observation=0"
	"Hopper-v5:ctrl_cost_weight=0.01,healthy_reward=2,healthy_z_range=0.6:inf,reset_noise_scale=0.01,exclude_current_positions_from_observation=0,terminate_when_unhealthy=0,frame_skip=5"
	"Hopper-v4:forward_reward_weight=1.5,healthy_state_range=-50:50,healthy_angle_range=-0.3:0.3,terminate_when_unhealthy=0"
	"Walker2d-v5:xml_file=walker2d.xml,healthy_z_range=0.7:2.2,healthy_angle_range=-1.2:1.2,exclude_current_positions_from_observation=0,frame_skip=2"
	"Walker2d-v4:ctrl_cost_weight=0.01,healthy_reward=0.5,terminate_when_unhealthy=0,reset_noise_scale=0.02"
	"Ant-v5:main_body=2,contact_cost_weight=0.001,contact_force_range=-0.5:0.5,healthy_z_range=0.3:1.0,ctrl_cost_weight=0.3,exclude_current_positions_from_observation=0,frame_skip=4"
	"Ant-v4:use_contact_forces=1,contact_cost_weight=0.001,ctrl_cost_weight=0.3,exclude_current_positions_from_observation=0"
	"Humanoid-v5:contact_cost_range=-inf:5,include_cinert_in_observation=0,include_qfrc_actuator_in_observation=0,exclude_current_positions_from_observation=0,forward_reward_weight=1.0,healthy_z_range=0.8:2.1,frame_skip=3"
	"Humanoid-v4:forward_reward_weight=1.5,ctrl_cost_weight=0.2,exclude_current_positions_from_observation=0,terminate_when_unhealthy=0"
	"HumanoidStandup-v5:uph_cost_weight=2,impact_cost_weight=1e-6,impact_cost_range=-inf:5,include_cvel_in_observation=0,reset_noise_scale=0.02,frame_skip=4"
	"HumanoidStandup-v4"
	"InvertedPendulum-v5:reset_noise_scale=0.05,frame_skip=3"
	"InvertedPendulum-v4"
	"InvertedDoublePendulum-v5:healthy_reward=5,reset_noise_scale=0.2,frame_skip=4"
	"InvertedDoublePendulum-v4"
	"Reacher-v5:reward_dist_weight=2,reward_control_weight=0.5,frame_skip=3"
	"Reacher-v4"
	"Swimmer-v5:forward_reward_weight=2,ctrl_cost_weight=0.001,reset_noise_scale=0.2,exclude_current_positions_from_observation=0,frame_skip=2"
	"Swimmer-v4:forward_reward_weight=0.5,exclude_current_positions_from_observation=0"
	"Pusher-v5:xml_file=pusher.xml,reward_near_weight=1,reward_dist_weight=2,reward_control_weight=0.2,frame_skip=4"
	"Pusher-v4"
)
for e in "${envs[@]}"; do
	steps=25
	case $e in Humanoid*) steps=10 ;; esac
	/usr/bin/python3 "$(dirname "$0")/../../../tools/mujoco_ref.py" --kit "$KIT" --env "$e" \
		--tag p --policy random --seed 7 --episodes 2 --max-steps $steps --out-dir "$OUT" --list
done
