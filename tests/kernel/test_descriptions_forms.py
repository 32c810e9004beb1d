"""get_tool_descriptions() is Kaval.AI 1.0's JSON text (a real str), with the list at .tools; iterating and indexing
the text give the list's dicts too, so code written for either form works."""

from __future__ import annotations

import json
import pickle

from kavalai import FunctionKernel, pythontool
from kavalai.kernel import ToolDescriptions


@pythontool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pythontool
def négatif(x: int) -> int:
    """Négation."""
    return -x


async def test_the_descriptions_are_the_list_and_its_json_text() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("math.add", add)
    kernel.register_python_tool("math.neg", négatif)
    descriptions = await kernel.get_tool_descriptions()
    plain = await kernel.describe_tools()
    # our form: a list of dicts
    assert [d["name"] for d in descriptions] == ["python://math.add", "python://math.neg"]
    assert descriptions[0]["inputSchema"]["required"] == ["a", "b"]
    assert descriptions[-1:] == plain[-1:]
    assert len(descriptions.to_list()) == 2
    assert len(descriptions) == len(json.dumps(plain, ensure_ascii=False))  # a str's len: json.loads relies on it
    assert descriptions == plain
    assert list(descriptions) == plain
    assert descriptions.to_list() == plain
    assert type(descriptions.to_list()) is list
    # Kaval.AI 1.0's form: JSON text
    assert json.loads(descriptions) == plain
    assert isinstance(descriptions, str)
    assert "python://math.add" in descriptions
    assert "Négation." in str(descriptions)  # not escaped: readable when printed
    assert plain[0] in descriptions
    assert {"name": "other"} not in descriptions
    assert pickle.loads(pickle.dumps(descriptions)) == plain


async def test_no_tools_is_falsy_in_both_forms() -> None:
    descriptions = await FunctionKernel().get_tool_descriptions()
    assert not descriptions
    assert descriptions == []
    assert json.loads(descriptions) == []
    assert descriptions == "[]"


def test_the_json_text_round_trips_through_the_constructor() -> None:
    items = [{"name": "python://x", "description": "", "inputSchema": {}, "outputSchema": {}}]
    built = ToolDescriptions(items)
    assert repr(built) == f"ToolDescriptions({items!r})"  # says what it is, not a list's repr
    assert json.loads(str(built)) == items
    assert built != [{"name": "python://y"}]


async def test_the_json_text_names_rest_tools_with_their_method_as_kaval_did() -> None:
    from kavalai import RestServer

    kernel = FunctionKernel()
    kernel.register_python_tool("math.add", add)
    kernel.register_rest_server(RestServer(name="shop", url="http://127.0.0.1:9"))
    kernel.register_rest_tool("shop", "get_item", "get", {"type": "object", "properties": {"id": {"type": "integer"}}})
    descriptions = await kernel.get_tool_descriptions(["rest://shop.*", "python://*"])
    kaval = {item["name"] for item in json.loads(descriptions)}
    assert kaval == {"python://math.add", "rest://shop.get_item [GET]"}
    assert {item["name"] for item in descriptions} == {"python://math.add", "rest://shop.get_item"}
    assert "rest://shop.get_item [GET]" in descriptions  # Kaval.AI code searching the text
    # The qualified name is one the kernel accepts back.
    assert kernel.select_tools(["rest://shop.get_item [GET]"]) == ["rest://shop.get_item"]
    copy = pickle.loads(pickle.dumps(descriptions))
    assert str(copy) == str(descriptions)
    assert copy == descriptions.to_list()


async def test_it_is_a_str_where_a_str_is_expected_and_the_list_is_at_tools() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("math.add", add)
    kernel.register_python_tool("math.neg", négatif)
    descriptions = await kernel.get_tool_descriptions()
    plain = await kernel.describe_tools()
    # what it is: the JSON text, as Kaval.AI 1.0 returned it
    assert len(descriptions) == len(str(descriptions)) > 2  # characters, as for any str
    assert json.loads(json.dumps(descriptions)) == str(descriptions)  # encoded as one JSON string, as any str
    assert f"{descriptions}" == str(descriptions) == json.dumps(plain, ensure_ascii=False)
    from jinja2 import Template  # how Kaval.AI 1.0's agent put it in its prompt

    assert json.loads(Template("{{ tools }}").render(tools=descriptions)) == plain
    # the list, for code that needs one
    tools = descriptions.tools
    assert type(tools) is list
    assert len(tools) == 2
    assert json.loads(json.dumps(tools)) == plain  # encoded once
    assert tools is not descriptions.tools  # a new list each time: changing it changes nothing here
    tools.clear()
    assert len(descriptions.tools) == 2
