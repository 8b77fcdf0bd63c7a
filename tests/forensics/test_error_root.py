"""One error root (issue 29): every error kind of ours derives from parsers.input.errors.HangForensicsError,
has a help text, and forensics.exitcodes.code_for is the one map from kind to exit code."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import forensics
import parsers
from forensics.errors import ForensicsError
from forensics.exitcodes import ExitCode, code_for
from parsers.input import errors

#: packages that need optional dependencies (torch, jupyter) to import; they define no error kinds
_OPTIONAL = ("forensics.demo", "forensics.notebook")


def _our_error_classes() -> dict[str, type[Exception]]:
    found = {}
    for pkg in (parsers, forensics):
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if info.name.startswith(_OPTIONAL) or info.name.endswith("__main__"):
                continue
            try:
                mod = importlib.import_module(info.name)
            except ImportError:  # an optional dependency (torch, ...) is missing here
                continue
            for name, obj in vars(mod).items():
                # not Terminated (an interrupt)
                if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__ == info.name:
                    found[f"{info.name}.{name}"] = obj
    return found


def test_every_error_kind_of_ours_is_below_the_one_root_and_has_a_help():
    classes = _our_error_classes()
    assert "parsers.readers.pyspy.PySpyFormatError" in classes and "forensics.bisect.state.StateError" in classes
    strays = [n for n, c in classes.items() if not issubclass(c, errors.HangForensicsError)]
    assert strays == []
    no_help = [n for n, c in classes.items() if not c.help]
    assert no_help == []


def test_kinds_callers_catch_as_valueerror_or_oserror_still_are():
    from parsers.readers.flight_recorder import UnsafePickle
    from parsers.input.safeio import UnsafeFile

    assert issubclass(errors.FileFormatError, ValueError) and issubclass(errors.ManifestError, ValueError)
    assert issubclass(UnsafePickle, ValueError) and issubclass(UnsafePickle, errors.UnsafeInput)
    err = UnsafeFile("/x/y", "is a symbolic link")
    assert isinstance(err, OSError) and isinstance(err, errors.UnsafeInput) and err.filename == "/x/y"


def test_a_bad_manifest_is_a_manifest_error():
    from parsers.model.manifest import manifest_from_dict

    with pytest.raises(errors.ManifestError, match="format"):
        manifest_from_dict({"format": "something-else"})


@pytest.mark.parametrize("err, code", [
    (ForensicsError("gone", ExitCode.NO_HOST), ExitCode.NO_HOST),
    (errors.InputError("not a bundle"), ExitCode.BAD_INPUT),
    (errors.FileFormatError("not py-spy JSON"), ExitCode.BAD_INPUT),
    (errors.UsageError("gc=0"), ExitCode.BAD_INPUT),
])
def test_code_for_is_the_one_map_from_kind_to_exit_code(err, code):
    assert code_for(err) is code


def test_input_error_shows_the_help_a_raise_gave_and_not_the_kinds():
    assert str(errors.InputError("no ranks")) == "no ranks"
    assert str(errors.InputError("no ranks", help="pass --ranks")) == "no ranks (pass --ranks)"
    assert errors.InputError("x").help == errors.InputError.help != ""
