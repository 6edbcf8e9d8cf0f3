"""`streamapp produce` and `streamapp consume` (the README's quickstart puts lines in and reads the
counts with them) against the test bed's broker."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from streamapp_runtime.console import PropertyError, client_config
from streamapp_runtime.console.produce import records

STREAMAPP = [sys.executable, "-m", "streamapp_api"]


@pytest.mark.unit
def test_lines_become_records_keyed_only_with_a_separator():
    lines = ["a\tone\n", "\n", "plain\r\n", "b\ttwo\tmore\n"]
    assert list(records(lines, None)) == [(None, "a\tone"), (None, "plain"), (None, "b\ttwo\tmore")]
    assert list(records(lines, "\t")) == [("a", "one"), (None, "plain"), ("b", "two\tmore")]


@pytest.mark.unit
def test_a_client_property_must_be_key_equals_value():
    assert client_config("k:9092", ["security.protocol=SSL", "sasl.password=a=b"]) == {
        "bootstrap.servers": "k:9092", "security.protocol": "SSL", "sasl.password": "a=b"}
    with pytest.raises(PropertyError, match="'-X oops'|-X 'oops'"):
        client_config("k:9092", ["oops"])


@pytest.mark.integration
def test_produced_lines_are_consumed_from_the_beginning_with_their_keys(kafka):
    topic = f"console-{uuid.uuid4().hex[:8]}"
    produced = subprocess.run([*STREAMAPP, "produce", "--kafka", kafka.bootstrap, topic, "--key-separator", " "],
                              input="k1 first\nsecond\n\nk1 third\n", text=True, capture_output=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    assert f"3 records written to {topic}" in produced.stderr
    consumed = subprocess.run([*STREAMAPP, "consume", "--kafka", kafka.bootstrap, topic, "--max", "3",
                               "--key-separator", "|", "--timeout", "20"], text=True, capture_output=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["k1|first", "|second", "k1|third"]
    # fewer records than asked: it says so and fails once the topic has been quiet for --timeout
    short = subprocess.run([*STREAMAPP, "consume", "--kafka", kafka.bootstrap, topic, "--max", "4", "--timeout", "2"],
                           text=True, capture_output=True, timeout=60)
    assert short.returncode == 1
    assert short.stdout.splitlines() == ["first", "second", "third"]
    assert "3 of 4 records" in short.stderr


@pytest.mark.integration
def test_an_unknown_topic_is_named_and_a_bad_property_refused(kafka):
    missing = subprocess.run([*STREAMAPP, "consume", "--kafka", kafka.bootstrap, "no-such-topic-here", "--timeout", "2"],
                             text=True, capture_output=True, timeout=60)
    assert missing.returncode == 1
    assert "topic no-such-topic-here not found" in missing.stderr
    bad = subprocess.run([*STREAMAPP, "produce", "--kafka", kafka.bootstrap, "t", "-X", "linger.ms"],
                         input="x\n", text=True, capture_output=True, timeout=60)
    assert bad.returncode == 2 and "-X 'linger.ms': expected KEY=VALUE" in bad.stderr
