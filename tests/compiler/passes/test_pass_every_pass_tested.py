"""Every pass of the accelerator pipeline has its before/expected test file here."""

from pathlib import Path

from vta.compiler.accel.pipeline import PASS_NAMES

HERE = Path(__file__).parent


def test_every_pipeline_pass_has_a_test_file() -> None:
    missing = [n for n in PASS_NAMES if not (HERE / f"test_pass_{n}.py").is_file()]
    assert not missing, (f"passes without a before/expected test (tests/compiler/passes/"
                         f"test_pass_<pass>.py): {', '.join(missing)}")
