"""dedupe: Spark's dropDuplicatesWithinWatermark (the key is remembered for the watermark delay)."""

from __future__ import annotations

from streamapp_api import Dedupe

from streamapp_runtime.compile.frame import Frame, StepError


def dedupe(frame: Frame, value: Dedupe, where: str) -> Frame:
    if frame.watermark is None:
        raise StepError(f"{where}.dedupe: needs a watermark on the stream's event time (set watermark on the source)")
    return frame.with_df(frame.df.dropDuplicatesWithinWatermark(list(value.keys)))
