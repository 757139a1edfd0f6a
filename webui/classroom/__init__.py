"""The live class (issue 26): students answer on their phones, the teacher's screen shows what
the class got wrong. ``store`` keeps classes, students and answers in one database shared by
every replica; ``deck`` is what is asked and how it is graded (kvcalc's questions and grader);
``qr`` draws the join link for the projector."""

from .limits import Limits  # noqa: F401
from .store import Store, get_store  # noqa: F401
