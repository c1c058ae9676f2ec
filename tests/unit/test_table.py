"""kubectl's table format: uppercase headers, left-aligned cells, exactly three spaces between."""

from kubectl_mc.table import render


def test_columns_are_padded_to_the_widest_cell_with_three_spaces() -> None:
    text = render(["name", "ready", "age"], [["web", "3/3", "5m"], ["database", "1/1", "2d4h"]])
    assert text.splitlines() == [
        "NAME       READY   AGE",
        "web        3/3     5m",
        "database   1/1     2d4h",
    ]


def test_numbers_are_left_aligned_and_none_is_blank() -> None:
    assert render(["a", "b", "c"], [[1, None, 100], [22, "x", 3]]).splitlines() == [
        "A    B   C",
        "1        100",
        "22   x   3",
    ]


def test_no_headers_and_no_rows() -> None:
    assert render(["name"], [["web"]], no_headers=True) == "web"
    assert render(["name"], []) == ""
