"""Demonstrations for policy learning in the simulated ALOHA cell (issue 23): gym-aloha's transfer-cube task
without gym-aloha or dm_control (transfer_cube.py), a scripted end-effector-space demonstrator (scripted.py) and
recorded episodes, one npz each (episodes.py).

    from string_perception.sim.demos import EpisodeConfig, record_episode, save_episode, load_episode
    ep = record_episode(seed=0, config=EpisodeConfig(cameras=('top',), height=120, width=160))
    ep.success, ep.images['top'].shape, ep.qpos.shape        # True, (400, 120, 160, 3), (400, 14)
"""
from .episodes import Episode, EpisodeConfig, load_episode, load_episodes, record_episode, save_episode
from .scripted import TransferCubeDemonstrator, TransferScript
from .transfer_cube import TransferCubeScene

__all__ = ['Episode', 'EpisodeConfig', 'TransferCubeDemonstrator', 'TransferCubeScene', 'TransferScript',
           'load_episode', 'load_episodes', 'record_episode', 'save_episode']
