"""Decoding choices on one model's outputs: argmax vs multi-label candidates, class-wise vs class-agnostic NMS at
several IoU thresholds.

    python -m benchmarks.nms_modes models/vitd_tiny_cayley.pt --split val --num-frames 200

Runs the model once over the frames, then decodes the same outputs with every setting and prints the headline
metrics (strict and symmetry-aware) and the kept boxes per frame side by side (the average best IoU ignores scores,
so it rises with the box count: read it next to AP3D and boxes/frame). Choose decoding on ``--split val``, never on
the test split.
"""
from __future__ import annotations

import argparse

import torch
from torch.utils.data import DataLoader

from string_perception.evaluation.evaluate import load_model, scene_config_for
from string_perception.training.inference import detections_to_arrays, evaluate_predictions, headline
from string_perception.runtime.postprocess import decode_detections
from string_perception.training.data import SceneDataset, collate

SHOWN = ('avg_best_iou', 'avg_best_iou_sym', 'avg_best_iou_agnostic_sym', 'ap3d_25_sym', 'ap3d_50_sym',
         'op_ap3d_25_sym')


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('checkpoint')
    p.add_argument('--split', default='val', choices=('val', 'test'))
    p.add_argument('--num-frames', type=int, default=200)
    p.add_argument('--nms-iou', type=float, nargs='+', default=[0.3, 0.1])
    p.add_argument('--operating-threshold', type=float, default=0.44)
    args = p.parse_args(argv)
    model, cfg, ckpt = load_model(args.checkpoint)
    dataset = SceneDataset(args.split, args.num_frames, scene_config_for(cfg, ckpt))
    raw, gts = [], []
    with torch.no_grad():
        for batch in DataLoader(dataset, batch_size=16, collate_fn=collate):
            out = model(batch['image'], batch['depth'], batch['K'])
            for b in range(out['boxes'].shape[0]):
                raw.append((out['boxes'][b].numpy(), out['logits'][b].numpy()))   # [N,12], [N,C]
                gts.append(batch['gts'][b])
    print('decode       nms             iou   ' + '  '.join(SHOWN) + '  boxes/frame')
    for multi_label in (False, True):
        for agnostic in (False, True):
            for nms in args.nms_iou:
                preds = [detections_to_arrays(decode_detections(bx, lg, list(cfg.class_names), score_threshold=0.05,
                                                                nms_iou=nms, max_detections=50,
                                                                class_agnostic=agnostic, multi_label=multi_label))
                         for bx, lg in raw]
                h = headline(evaluate_predictions(preds, gts, cfg.class_names,
                                                  operating_threshold=args.operating_threshold, breakdown=False))
                per_frame = sum(len(p['scores']) for p in preds) / max(1, len(preds))
                print(f"{'multi-label' if multi_label else 'argmax':12s} "
                      f"{'class-agnostic' if agnostic else 'class-wise':14s}  {nms:.2f}  "
                      + '  '.join(f'{h[k]:.4f}' for k in SHOWN) + f'  {per_frame:.1f}', flush=True)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
