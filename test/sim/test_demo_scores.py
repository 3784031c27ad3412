"""``sim_ros/demo_scores`` without ROS: when a live frame starts (for the demo's latency column)."""
import pytest

from string_perception.sim_ros.demo_scores import first_arrival


def test_a_frame_starts_at_its_first_message_whichever_topic_brought_it():
    msgs = {'gt': {10: ('gt', 5.030), 20: ('gt', 6.0)},            # stamp -> (message, time.monotonic())
            'image': {10: ('rgb', 5.010), 20: ('rgb', 6.2)},
            'depth': {10: ('d', 5.020)},
            'info': {}}
    assert first_arrival(msgs, 10) == pytest.approx(5.010)         # the colour image, not the later ground truth
    assert first_arrival(msgs, 20) == pytest.approx(6.0)           # the ground truth came first; depth never came
    with pytest.raises(ValueError):                                # no message of that stamp: no start to invent
        first_arrival(msgs, 30)
