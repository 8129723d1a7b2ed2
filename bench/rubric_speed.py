"""How many replies a second the rubric judge scores, on contexts never seen before.

    python -m bench.rubric_speed

The rubric judge is the deterministic cold start every world's judge begins as, and it scores
inside requests; its target is 2,000 judgements a second on one core. Three rounds of 500
distinct ten-turn contexts (so its context cache cannot flatter the number); the best round is
printed. It was a timed test until a loaded two-core machine failed it: a speed target is a
benchmark's (the project's rule), not a test's.
"""

from __future__ import annotations

import time

from trainers.judge.rubric import RubricJudge, Turn

TARGET = 2000
LINES = [
    "Good morning, Harbour Lettings, how can I help?",
    "Hi, I saw the two-bed flat on Elm Road online, is it still free?",
    "It is! It's £1,200 a month and available from June.",
    "Cool, I've got two kids so I'd need somewhere near a school.",
    "There are two good primary schools within walking distance.",
    "That sounds great. Is there any outside space?",
    "Yes, a small private garden at the back.",
    "Nice. We need to move quite soon though, my lease ends next month.",
    "Understood. Viewings are open this week.",
]
REPLY = "There is one permit space. Shall I book a viewing on Thursday at 6pm?"


def best_rate(rounds: int = 3, per_round: int = 500) -> float:
    judge = RubricJudge()
    base = [
        Turn("agent" if index % 2 == 0 else "customer", text) for index, text in enumerate(LINES)
    ]
    best = 0.0
    for round_ in range(rounds):
        contexts = [
            (*base, Turn("customer", f"OK, what about parking for flat {round_}-{n}?"))
            for n in range(per_round)
        ]
        started = time.perf_counter()
        for context in contexts:
            judge.score(context, REPLY)
        best = max(best, len(contexts) / (time.perf_counter() - started))
    return best


def main() -> int:
    rate = best_rate()
    verdict = "meets" if rate >= TARGET else "misses"
    print(f"rubric judge: {rate:,.0f} judgements a second (best of 3 rounds); {verdict} {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
