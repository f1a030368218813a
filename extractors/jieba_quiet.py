"""jieba, imported on first use, without the lines it logs to stderr as it loads its
dictionary (`Building prefix dict …`, `Loading model cost …`)."""

from __future__ import annotations

import logging
from typing import Any


def quiet_jieba() -> Any:
    """The `jieba` module, with `jieba.posseg` loaded and its logger at warnings only."""
    import jieba
    import jieba.posseg

    jieba.setLogLevel(logging.WARNING)
    return jieba
