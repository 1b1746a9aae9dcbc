"""Every pass of the GPU pipeline has its before/expected test file here."""

from pathlib import Path

from vta.gpu.lower_gpu import PIPELINE

HERE = Path(__file__).parent


def test_every_pipeline_pass_has_a_test_file() -> None:
    names = dict.fromkeys(n for n, _, _ in PIPELINE)
    missing = [n for n in names if not (HERE / f"test_{n}.py").is_file()]
    assert not missing, (f"passes without a before/expected test (tests/gpu/passes/"
                         f"test_<pass>.py): {', '.join(missing)}")
