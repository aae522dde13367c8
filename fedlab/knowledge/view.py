"""What every client of one student model in a process shares: the public set in the student's tokens,
the memo of its alignments with a teacher's, and the teacher's tokens and vocabulary map into the
student's (the teacher's tokenizer is public; its weights are not needed)."""
from __future__ import annotations

from fedlab.align import cached_vocab_map
from fedlab.knowledge.public import Aligner, PublicSet


class StudentView:
    def __init__(self, host, tokenizer):
        self.host, self.tokenizer = host, tokenizer
        self.public = PublicSet(tokenizer, host.data.public, host.cfg.model.max_length)
        self.aligner = Aligner(self.public)
        self._teachers: dict[str, tuple] = {}

    def teacher_view(self, name: str):
        """(the public set as the teacher model's tokenizer cuts it, its vocabulary map into the student's)."""
        from fedlab.models.zoo import load_tokenizer

        if name not in self._teachers:
            tok = load_tokenizer(name)
            teacher = PublicSet(tok, self.host.data.public, self.host.cfg.model.max_length)
            self._teachers[name] = (teacher, cached_vocab_map(tok, self.tokenizer))
        return self._teachers[name]


def student_view(host, resident) -> StudentView:
    """The process-wide view of `resident` as a student (created on first use, kept in `host.shared`)."""
    key = ("student-view", resident.name)
    if key not in host.shared:
        host.shared[key] = StudentView(host, resident.tokenizer)
    return host.shared[key]
