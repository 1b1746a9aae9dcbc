"""The README's first lines are the commands CI runs: keep them and .ci/run in step."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.strip().splitlines()]


def test_readme_opens_with_install_and_test_commands() -> None:
    install, test = readme_commands()
    assert "pip install -e '.[test]'" in install
    assert "vta run --hw hwconfigs/pynq.yaml conv2d" in install
    assert "python -m pytest -q" in test


def test_ci_runs_the_readme_commands() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    install, test = readme_commands()
    for step in install.split("&&") + test.split("&&"):
        step = step.strip()
        if step.startswith(". .venv") or step.startswith("python3 -m venv"):
            continue
        assert step in ci, step
