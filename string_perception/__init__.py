"""string_perception: ViTD with STRING position encodings for RGB-D 3D detection in ROS 2."""
__version__ = '0.1.0'
