"""Compile a trained ViTD (STRING -> folded RoPE-Mixed) and export to ONNX (docs/DESIGN.md §2, docs/ARCHITECTURE.md).

    deployable.py    DeployableViTD(model, precision): canonical form folded into q/k, fp32 angles/softmax
    graph_checks.py  forbidden op types (FFT, solve, inverse, expm, complex), fp16 islands
    metadata.py      metadata_props from the checkpoint (+ weights checksum)
    to_onnx.py       trace to ONNX (dynamic batch, weights as initializers, checker)
    verify.py        ONNX Runtime vs PyTorch parity on random and generated test-split frames
    pipeline.py      export_checkpoint: checkpoint -> checked, verified file(s) + <out stem>.export.json
    cli.py           the `string-perception-export` command (pipeline.export_checkpoint)
    optimize.py      the `string-perception-optimize` CLI: int8 QDQ variant of an exported fp32 file (issue 37)

Needs torch; the runtime (string_perception.runtime) reads what this writes without torch.
"""
from .deployable import DeployableViTD, FoldedAttention, compile_position_encodings

__all__ = ['DeployableViTD', 'FoldedAttention', 'compile_position_encodings']
