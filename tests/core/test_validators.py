"""The shared validators (helpers.core.validate) and the helpers that now use them: a wrong kind
of value is an InputTypeError (a bool count included), a value out of range an InputError."""

from __future__ import annotations

import pytest

from helpers.core import progress, validate
from helpers.core.errors import InputError, InputTypeError
from helpers.measure import host_memory, sandbox
from helpers.models.toygpu import link


@pytest.mark.parametrize("call", [
    lambda v: validate.whole_number(v, "n", 0, 9),
    lambda v: validate.byte_size(v, "n"),
    lambda v: validate.count(0, 9)(v),
    lambda v: host_memory.check_nbytes(v),
    lambda v: progress.Progress(v, "x"),
    lambda v: link.LinkModel().uc_reads(v),
    lambda v: link.LinkModel().dma(v),
    lambda v: link.LinkModel(seed=v),
])
@pytest.mark.parametrize("bad", [True, 2.5, "3", None])
def test_a_count_of_the_wrong_kind_is_an_input_type_error(call, bad):
    with pytest.raises(InputTypeError):
        call(bad)


@pytest.mark.parametrize("call, bad", [
    (lambda v: validate.whole_number(v, "n", 0, 9), 10),
    (lambda v: validate.byte_size(v, "n"), 0),
    (lambda v: host_memory.check_nbytes(v), -1),
    (lambda v: progress.Progress(v, "x"), -1),
    (lambda v: link.LinkModel().uc_reads(v), -1),
    (lambda v: link.LinkModel().uc_reads(1, v), 3),
])
def test_a_count_out_of_range_is_an_input_error(call, bad):
    with pytest.raises(InputError):
        call(bad)


def test_access_widths():
    model = link.LinkModel()
    for w in link.ACCESS_WIDTHS:
        assert model.uc_reads(2, w) > 0
    with pytest.raises(InputTypeError, match="access width must be a whole number"):
        model.uc_writes(1, True)


def test_byte_size_says_positive():
    with pytest.raises(InputError, match="n must be a positive number of bytes, got 0"):
        validate.byte_size(0, "n")
    with pytest.raises(InputError, match="n must be at least 64 bytes, got 8"):
        validate.byte_size(8, "n", 64)


def test_text():
    assert validate.text("x", "name") == "x"
    with pytest.raises(InputError, match="name must not be empty"):
        validate.text("  ", "name")
    with pytest.raises(InputTypeError, match="name must be a string"):
        validate.text(b"x", "name")


@pytest.mark.parametrize("code, timeout", [("", 5), (None, 5), ("pass", 0), ("pass", 601), ("pass", True)])
def test_sandbox_arguments_are_input_errors(code, timeout):
    with pytest.raises((InputError, InputTypeError)):
        sandbox.run_python(code, timeout)


def test_parameter_rules_say_what_they_accept():
    assert str(validate.count(1, 2000)) == "a whole number from 1 to 2000"
    assert str(validate.one_of("h2d", "d2h")) == "one of 'h2d', 'd2h'"
    assert str(validate.size(4096)) == "a byte size from 4096 up"
    assert str(validate.duration(0, 60)) == "seconds, more than 0 and at most 60"
    assert validate.boolean()(True, "flag") is True
    with pytest.raises(InputTypeError, match="frames must be a whole number"):
        validate.count(1, 2000)(2.5, "frames")


def test_every_parameter_says_what_it_accepts():
    """`record --list` shows each parameter's rule in words; a validator that cannot say is refused."""
    from helpers.core import experiments

    for exp in experiments.discover().values():
        for name, rule in exp.params.items():
            text = validate.describe(rule)
            assert text and "<function" not in text and not text.endswith(("(", ",")), (exp.id, name, text)

    def silent(v, what="x"):
        return v

    with pytest.raises(experiments.RegistryError, match="cannot say what they accept"):
        experiments.experiment("demo.silent", chapter=0, title="t", params={"n": silent})
