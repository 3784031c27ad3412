"""Parameter changes while the perception node runs: which apply at once, which at the next configure.

:func:`on_parameter_updates` is the body of the node's rclpy on-set-parameters callback: every update is checked
(``params.check_updates``: types, ranges, choices; a refused update is logged and nothing changes); while the node
is configured the validated values are merged into its running configuration and pushed to it (``apply``, which
may still refuse with ValueError, e.g. ``publish_tf`` without a broadcaster); then the **live** values
(``ParamSpec.live``) enter the running configuration, and the others are accepted (ROS stores them) with a log line
saying they apply at the next configure. :func:`pipeline_settings` maps a configuration to
``Pipeline.set_params`` keywords.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from rcl_interfaces.msg import SetParametersResult

from .. import node_params as P
from ..runtime.tiling import TilingConfig, parse_tiling

__all__ = ['on_parameter_updates', 'pipeline_settings', 'tiling_setting']


def pipeline_settings(cfg: Mapping[str, Any], model_metadata: Any,
                      provider: str = 'CPUExecutionProvider') -> dict[str, Any]:
    """The live pipeline parameters of ``cfg`` as ``Pipeline.set_params`` keywords (``score_threshold`` -1 = the
    model's recommended threshold from ``model_metadata``; ``max_depth_m`` 0 = no limit; ``flip_tta`` auto = on
    when ``provider``, the session's first, is a GPU one)."""
    return dict(score_threshold=P.effective_score_threshold(cfg['score_threshold'], model_metadata),
                nms_iou=cfg['nms_iou'], max_detections=cfg['max_detections'], pre_nms_top_k=cfg['pre_nms_top_k'],
                max_depth_m=cfg['max_depth_m'] or None, nms_class_agnostic=cfg['nms_class_agnostic'],
                multi_label=cfg['multi_label'], resize_mode=cfg['resize_mode'],
                flip_tta=P.flip_tta_on(cfg['flip_tta'], provider))


def tiling_setting(cfg: Mapping[str, Any]) -> TilingConfig | None:
    """The ``tiling`` parameter as ``Pipeline.set_tiling``'s argument (``'none'`` -> None)."""
    return parse_tiling(cfg['tiling'])


def on_parameter_updates(updates: Sequence[Any], cfg: dict[str, Any] | None,
                         apply: Callable[[dict[str, Any], Mapping[str, Any]], None], log) -> SetParametersResult:
    """``updates``: rclpy Parameters; ``cfg``: the running configuration, updated in place (None while not
    configured: the updates are only checked); ``apply(merged, new)`` pushes ``{**cfg, **new}`` to the node (new =
    the validated updates); ``log``: the node's logger."""
    ok, reason = P.check_updates([(p.name, p.value) for p in updates])
    if ok and cfg is not None:
        new = {p.name: P.validate(p.name, p.value) for p in updates if p.name in P.SPECS}
        try:
            apply({**cfg, **new}, new)
        except ValueError as e:
            ok, reason = False, str(e)
        else:
            cfg.update({k: v for k, v in new.items() if P.SPECS[k].live})
            later = sorted(k for k in new if not P.SPECS[k].live)
            if later:
                log.info(f'{", ".join(later)} will apply at the next configure')
    if not ok:
        log.warning(f'rejected parameter update: {reason}')
    return SetParametersResult(successful=ok, reason=reason)
