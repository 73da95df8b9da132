"""``mi400plan schema``: each envelope's JSON Schema, generated from the result models, accepts the
envelopes the commands print (ok and error) and describes the fields."""

from __future__ import annotations

import json

import pytest

SAMPLES = {
    "fit": ["fit", "llama3.1-8b", "--sku", "mi300x", "--sku", "h100", "--precision", "bf16,fp8"],
    "sweep": ["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "64", "--top", "1", "--no-ranges"],
    "serve": ["serve", "llama3.1-8b", "--sku", "mi300x", "--gpus", "8"],
    "comm": ["comm", "all-reduce", "--size", "1MiB..4MiB", "--group", "8", "--sku", "mi300x"],
    "rack": ["rack", "helios"],
    "cost": ["cost", "mi300x"],
    "profiles": ["profiles", "list"],
    "validate": ["validate", "--serve", "--no-loso"],  # the training validation's refits take minutes
}


@pytest.mark.parametrize("command", sorted(SAMPLES))
def test_schema_accepts_the_commands_envelope(cli, command):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(cli(["schema", command]).stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    r = cli([*SAMPLES[command], "--json"])
    assert r.exit_code == 0, r.output
    jsonschema.validate(json.loads(r.stdout), schema)
    from mi400plan.errors import UsageError
    from mi400plan.render.jsonout import error_envelope

    jsonschema.validate(error_envelope(command, UsageError("bad", hint="h")).model_dump(mode="json"), schema)


def test_schema_describes_fields_from_the_models():
    from mi400plan.results.schema import envelope_schema

    fit = envelope_schema("fit")["$defs"]
    assert "most loaded rank" in fit["MemoryBytes"]["description"]
    assert "scale-up domain" in fit["FitRow"]["properties"]["domain_size"]["description"]


def test_every_result_model_is_in_its_commands_schema():
    import importlib
    import pkgutil

    import mi400plan.results as pkg
    from mi400plan.results.common import Result
    from mi400plan.results.schema import RESULTS

    for mod in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"mi400plan.results.{mod.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Result) and obj is not Result and obj.__module__ == module.__name__:
                assert f"{mod.name}:{obj.__name__}" in RESULTS[obj.command], obj


def test_validate_schema_describes_the_serving_validation(cli):
    """Both ``validate`` results are in its schema, the serving one's fields described from the model."""
    defs = json.loads(cli(["schema", "validate"]).stdout)["$defs"]
    assert {"ValidateResult", "ServeValidateResult", "ServeValidateRow", "ServeValidateGroup"} <= set(defs)
    row = defs["ServeValidateRow"]["properties"]
    assert "+ = optimistic" in row["tput_error"]["description"]
    assert "predicted too short" in row["ttft_error"]["description"]


def test_schema_without_a_command_lists_every_command(cli):
    every = json.loads(cli(["schema"]).stdout)
    assert {"fit", "sweep", "serve", "comm", "rack", "cost", "profiles", "calibrate"} <= set(every)
    assert cli(["schema", "nope"]).exit_code == 2
