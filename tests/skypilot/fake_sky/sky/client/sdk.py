"""sky.client.sdk of the stand-in: requests resolve at once, so `get(request_id)` returns the value;
the enabled clouds are $FAKE_SKY_CLOUDS (comma-separated; default aws)."""

from __future__ import annotations

import os


def get(request_id):
    return request_id


def enabled_clouds(workspace=None, expand=False):
    return [cloud for cloud in os.environ.get("FAKE_SKY_CLOUDS", "aws").split(",") if cloud]
