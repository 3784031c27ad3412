"""ament_python build for string_perception (also installable with plain pip)."""
from glob import glob

from setuptools import find_packages, setup

PACKAGE = 'string_perception'

setup(
    name=PACKAGE,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*', 'benchmarks', 'benchmarks.*']),
    data_files=[
        ('share/ament_index/resource_index/packages', [f'resource/{PACKAGE}']),
        (f'share/{PACKAGE}', ['package.xml']),
        (f'share/{PACKAGE}/launch', glob('launch/*.py')),
        (f'share/{PACKAGE}/config', glob('config/*.yaml') + glob('config/*.xml') + glob('config/*.rviz')),
        (f'share/{PACKAGE}/config/recipes', glob('config/recipes/*.yaml')),   # training recipes (model cards)
        (f'share/{PACKAGE}/models', glob('models/*.onnx') + glob('models/*.json') + glob('models/*.md')),
        (f'share/{PACKAGE}/data/sample_recording', glob('data/sample_recording/*')),   # the demo's recording
    ],
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='string_perception developers',
    maintainer_email='dev@string-perception.invalid',
    description='ViTD with STRING position encodings for RGB-D 3D detection in ROS 2',
    license='Apache-2.0',
    tests_require=['pytest'],
    entry_points={
        'console_scripts': [
            # ROS executables (launch files and `ros2 run` use these names): package_name underscore style
            'string_perception_node = string_perception.ros.node:main',
            'string_perception_policy = string_perception.ros.policy_node:main',
            # commands: string-perception-<what>
            'string-perception-train = string_perception.training.train:main',
            'string-perception-eval-checkpoint = string_perception.evaluation.evaluate:main',
            'string-perception-eval-workcell = string_perception.evaluation.workcell:main',
            'string-perception-eval-bag = string_perception.bags.eval_bag:main',
            'string-perception-export = string_perception.export.cli:main',
            'string-perception-optimize = string_perception.export.optimize:main',
            'string-perception-generate = string_perception.scenes.cli:main',
            'string-perception-play = string_perception.bags.play:main',
            'string-perception-record = string_perception.bags.record:main',
            'string-perception-demo = string_perception.demo:main',
            'string-perception-sim = string_perception.sim_ros.sim_camera:main',
            'string-perception-sim-aloha = string_perception.sim_ros.sim_aloha_loop:main',
            'string-perception-train-policy = string_perception.policy.train_bc:main',
            'string-perception-train-localiser = string_perception.policy.train_localiser:main',
            # old names, kept as aliases for one release (test/docs/test_console_scripts.py)
            'string-perception-evaluate = string_perception.evaluation.evaluate:main',
            'string-perception-eval = string_perception.bags.eval_bag:main',
        ],
    },
)
