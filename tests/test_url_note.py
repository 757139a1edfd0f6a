"""The note "Ignored in the link" (webui/urlstate.py) says which of a link's values no widget
took; a value that applies later, once the page draws its input, leaves the note (teaching
review 4, F24: s_batch=16 on DeepSeek-V3 stayed "ignored" after the change of GPU and TP that
let the step-time page take it)."""

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402


def _guarded_app():
    import streamlit as st

    from webui.urlstate import bound, url_guard_begin, url_guard_end

    url_guard_begin()
    note = st.empty()
    if st.checkbox("fits", key="fits"):  # a page that draws its input only once it fits
        st.number_input("Batch", 1, 4096, 1, **bound("s_batch", "num"))
    url_guard_end(note)


def test_a_link_value_that_applies_later_leaves_the_note():
    # F24: s_batch=16 on a setup that does not fit is not taken (no input is drawn); once the
    # setup fits the input takes 16 from the link, and the note must go, for good.
    at = AppTest.from_function(_guarded_app)
    at.query_params["s_batch"] = "16"
    at.run()
    assert [w for w in at.warning if "s\\_batch=16" in w.value or "s_batch=16" in w.value]
    at.run()  # still not drawn: still ignored
    assert at.warning
    at.checkbox(key="fits").check().run()
    assert at.number_input(key="s_batch").value == 16
    assert not at.warning
    at.number_input(key="s_batch").set_value(17).run()  # the user moves on: no note again
    assert not at.warning
