"""RequestPlan: where each argument of a REST tool goes (pure, no server)."""

from __future__ import annotations

import re

import pytest

from kavalai.adapters.rest._request import RequestPlan, path_placeholders
from kavalai.errors import ToolInputError

URI = "rest://s.t"


def test_placeholders_are_found_in_order() -> None:
    assert path_placeholders("/a/{x}/b/{y_z}") == ("x", "y_z")
    assert path_placeholders("/plain") == ()


def test_get_sends_path_values_encoded_and_the_rest_as_query() -> None:
    plan = RequestPlan.simple("get", "/files/{name}")
    request = plan.prepare({"name": "a b/c?d", "flag": True, "n": 3, "tags": ["x", "y"], "skip": None}, uri=URI)
    assert request.method == "GET"
    assert request.path == "/files/a%20b%2Fc%3Fd"
    assert request.query == [("flag", "true"), ("n", "3"), ("tags", "x"), ("tags", "y")]
    assert not request.has_body


def test_objects_in_the_query_are_json_text() -> None:
    request = RequestPlan.simple("DELETE", "/x").prepare({"filter": {"a": 1}}, uri=URI)
    assert request.query == [("filter", '{"a":1}')]


def test_post_sends_the_rest_as_a_json_object() -> None:
    request = RequestPlan.simple("POST", "/items/{id}").prepare({"id": 7, "name": "n"}, uri=URI)
    assert request.path == "/items/7"
    assert request.query == []
    assert request.has_body
    assert request.body == {"name": "n"}


def test_header_query_and_body_field_placement() -> None:
    plan = RequestPlan(
        method="POST",
        path="/sum",
        query_params=frozenset({"scale"}),
        header_params=(("trace", "X-Trace"),),
        body_field="body",
    )
    request = plan.prepare({"scale": 2, "trace": "t-1", "body": [1, 2]}, uri=URI)
    assert request.query == [("scale", "2")]
    assert request.headers == {"X-Trace": "t-1"}
    assert request.body == [1, 2]
    assert request.has_body


def test_a_body_field_left_out_sends_no_body() -> None:
    plan = RequestPlan(method="POST", path="/sum", body_field="body")
    assert not plan.prepare({}, uri=URI).has_body


def test_a_missing_path_value_is_an_input_error_naming_it() -> None:
    with pytest.raises(ToolInputError, match=r"rest://s\.t: item_id: required to fill the path") as info:
        RequestPlan.simple("GET", "/items/{item_id}").prepare({}, uri=URI)
    assert info.value.uri == URI
    assert info.value.errors[0]["loc"] == ("item_id",)


@pytest.mark.parametrize("value", ["", ".", ".."])
def test_a_path_value_that_would_name_another_url_is_refused(value: str) -> None:
    # "/items/.." is normalised to "/" by any HTTP client: the call would reach another resource.
    plan = RequestPlan.simple("DELETE", "/items/{item_id}/tags")
    with pytest.raises(
        ToolInputError, match=rf"rest://s\.t: item_id: '{re.escape(value)}' cannot fill the path"
    ) as info:
        plan.prepare({"item_id": value}, uri=URI)
    assert info.value.errors[0]["loc"] == ("item_id",)
    assert plan.prepare({"item_id": "..."}, uri=URI).path == "/items/.../tags"
    assert plan.prepare({"item_id": "a.."}, uri=URI).path == "/items/a../tags"


def test_a_header_argument_given_as_none_is_not_sent() -> None:
    plan = RequestPlan(method="GET", path="/x", query_params=frozenset(), header_params=(("trace", "X-Trace"),))
    assert plan.prepare({"trace": None}, uri=URI).headers == {}
    assert plan.prepare({"trace": 7}, uri=URI).headers == {"X-Trace": "7"}


def test_an_optional_object_body_is_sent_only_when_it_has_content() -> None:
    optional = RequestPlan(
        method="POST", path="/x", query_params=frozenset({"q"}), body_object=True, body_optional=True
    )
    assert not optional.prepare({"q": 1}, uri=URI).has_body
    request = optional.prepare({"q": 1, "note": "n"}, uri=URI)
    assert (request.has_body, request.body) == (True, {"note": "n"})
    required = RequestPlan(method="POST", path="/x", query_params=frozenset({"q"}), body_object=True)
    assert (required.prepare({"q": 1}, uri=URI).body, required.prepare({"q": 1}, uri=URI).has_body) == ({}, True)


def test_joined_query_lists_are_sent_as_one_comma_separated_value() -> None:
    plan = RequestPlan(method="GET", path="/x", query_params=frozenset({"a", "b"}), joined_params=frozenset({"a"}))
    query = plan.prepare({"a": [1, "x", None], "b": [1, 2]}, uri=URI).query
    assert sorted(query) == [("a", "1,x"), ("b", "1"), ("b", "2")]
