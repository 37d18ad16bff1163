"""Build hook (the metadata is in pyproject.toml): a wheel carries the Hydra configs.

The configs stay at the repository's top level (``conf/``), where users edit them; an editable install reads
them there. A wheel or non-editable install has no repository, so its ``pipeline`` package gets a copy in
``pipeline/conf/`` (see ``pipeline/config/paths.py``).
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CONF = Path(__file__).resolve().parent / "conf"


class BuildWithConfigs(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # the repository's conf/ is read in place
        for source in sorted(CONF.rglob("*.yaml")):
            target = Path(self.build_lib) / "pipeline" / "conf" / source.relative_to(CONF)
            self.mkpath(str(target.parent))
            self.copy_file(str(source), str(target))


setup(cmdclass={"build_py": BuildWithConfigs})
