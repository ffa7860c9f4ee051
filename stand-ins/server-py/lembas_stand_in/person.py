"""The person in the web UI answering cards: approvals, questions and plans.

Until a test tells the person how to answer (the ``answer_cards`` hook), nobody answers: a card
waits for its person, as the spec allows, and one that is not patient is dismissed after the
card timeout (a patient card is never timed out: the device may settle it). A card the device
takes down (``_lembas/permission/settled``) is not answered afterwards.
"""

from __future__ import annotations

import asyncio
from typing import Any

#: How long a card that is not patient stays up unanswered, unless a test says.
DEFAULT_CARD_TIMEOUT = 30.0


def seconds(value: Any, default: float) -> float:
    """A duration as the suite writes it (`300ms`, `2s`, or a number of milliseconds)."""
    if isinstance(value, (int, float)):
        return value / 1000
    if isinstance(value, str):
        text = value.strip()
        try:
            if text.endswith("ms"):
                return float(text[:-2]) / 1000
            if text.endswith("s"):
                return float(text[:-1])
        except ValueError:
            return default
    return default


class Person:
    """Answers each card by the policy a test set, after its delay, never after it was settled."""

    def __init__(self) -> None:
        self.policy: dict[str, Any] | None = None
        self.settled: set[str] = set()

    def configure(self, policy: dict[str, Any]) -> None:
        self.policy = policy

    def settle(self, tool_call_id: str) -> None:
        self.settled.add(tool_call_id)

    async def answer(self, card: dict[str, Any]) -> dict[str, Any] | None:
        """The card's answer, `None` for a dismissal; waits for ever on a card nobody answers."""
        policy = self.policy or {}
        patient = bool(card["meta"].get("patient"))
        timeout = seconds(policy.get("timeout"), DEFAULT_CARD_TIMEOUT)
        delay = seconds(policy.get("delay"), 0.0)
        answer = self.choose(card, policy) if self.policy is not None else None
        if answer is not None and (patient or delay < timeout):
            await asyncio.sleep(delay)
            if card["toolCallId"] in self.settled:
                await asyncio.Event().wait()
            return answer
        if patient:
            # Nobody here answers it: it stays up until the device settles it.
            await asyncio.Event().wait()
        await asyncio.sleep(timeout)
        if card["toolCallId"] in self.settled:
            await asyncio.Event().wait()
        return None

    @staticmethod
    def choose(card: dict[str, Any], policy: dict[str, Any]) -> dict[str, Any] | None:
        method = card["method"]
        if method == "session/request_permission":
            rule = policy.get("permission", "allow_once")
            kinds = card["kinds"]
            wanted = {"allow_once": "allow_once", "allow_always": "allow_always", "deny": "reject_once"}.get(rule)
            if wanted is None:
                return None
            option = next((o for o, k in kinds.items() if k == wanted), None)
            if option is None and rule == "allow_always":
                option = next((o for o, k in kinds.items() if k == "allow_once"), None)
            if option is None:
                return None
            answer: dict[str, Any] = {"optionId": option}
            if rule == "deny":
                answer["_meta"] = {"lembas": {"feedback": "not now"}}
            return answer
        if method == "_lembas/question":
            rule = policy.get("question", "recommended")
            questions = card.get("questions") or []
            if rule == "dismiss":
                return {"outcome": "dismissed"}
            if rule == "ignore":
                return None
            answers = []
            for question in questions:
                options = question.get("options") or [] if isinstance(question, dict) else []
                if rule == "skip":
                    answers.append({"kind": "skipped"})
                elif rule == "custom":
                    answers.append({"kind": "custom", "text": "in my own words"})
                else:
                    picked = next((o for o in options if rule == "recommended" and o.get("recommended")), None)
                    picked = picked or (options[0] if options else None)
                    answers.append({"kind": "options", "labels": [picked["label"]] if picked else []})
            return {"outcome": "answered", "answers": answers}
        rule = policy.get("plan", "approve")
        if rule == "approve":
            return {"outcome": "approve", "mode": "edit"}
        if rule == "approve_manual":
            return {"outcome": "approve", "mode": "manual"}
        if rule == "revise":
            return {"outcome": "revise", "feedback": "smaller steps, please"}
        if rule == "dismiss":
            return {"outcome": "dismissed"}
        return None
