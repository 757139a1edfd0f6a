"""The pages' longer prose as data: ``webui/text/<name>.toml``, one file a page (or sidebar),
each entry a ``str.format`` template whose fields name the numbers the page computes
(``{cap.users_cap:,}``). The code keeps the short labels and the sentences that branch."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path


class Prose(dict):
    def __call__(self, key: str, **values: object) -> str:
        """The template ``key`` filled with ``values``."""
        return self[key].format(**values)


@lru_cache(maxsize=32)
def prose(name: str) -> Prose:
    """The templates of ``webui/text/<name>.toml``, read once."""
    path = Path(__file__).with_name("text") / f"{name}.toml"
    return Prose(tomllib.loads(path.read_text(encoding="utf-8")))
