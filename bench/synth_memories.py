"""A synthetic agent-memory benchmark with known answers (issue 18 item 5): decisions,
preferences and corrections of small software teams, in LoCoMo's JSON format so the referee
(``../shared/bench/eval_locomo.py``), ``bench/retrieval_lab.py``, ``bench/recall_lab18.py``
and ``bench/locomo.py --data`` all read it unchanged.

Each "conversation" is one team's memory log: sessions (one per working day, dated) of turns
by four people and the team's assistant. The facts are drawn from the lists below with a fixed
seed; the chit-chat between facts comes from generic small-talk templates. Every question is
generated together with the turn(s) that answer it (``evidence``), so the answers are known:

* single-hop (category 4): one person's preference ("Which editor does Marco prefer?"), or a
  fact the assistant noted about a person (the name is *not* the turn's speaker — the case
  where favouring a named speaker's turns is wrong);
* temporal (2): "When did the team decide to ...?" — the decision turn (its session date
  answers it);
* multi-hop (1): everything decided about one area over several sessions ("Which databases did
  the team decide on or against?"), or two people's preferences at once;
* corrections (4): a decision later corrected — the question asks for the current value, the
  evidence is the correcting turn;
* open-domain (3): an inference from a stated hobby ("Would Tom enjoy a sailing trip?").

Nothing here is taken from LoCoMo: names, topics and wording are this script's.

Usage::

    .venv/bin/python bench/synth_memories.py                 # writes bench/data/synth_memories.json
    .venv/bin/python bench/synth_memories.py --seed 7 --teams 3 --out /tmp/s.json
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "data" / "synth_memories.json"

PEOPLE = [["Priya", "Marco", "Lena", "Tom"], ["Aisha", "Jonas", "Mei", "Diego"], ["Sofia", "Kwame", "Yuki", "Noah"],
          ["Elena", "Ravi", "Hana", "Oscar"]]
ASSISTANT = "Assistant"

#: (area, question noun, options): decisions and corrections draw from these.
AREAS = [
    ("database", "databases", ["Postgres", "MySQL", "SQLite", "MongoDB", "CockroachDB"]),
    ("message queue", "message queues", ["Kafka", "RabbitMQ", "NATS", "Redis streams"]),
    ("CI system", "CI systems", ["GitHub Actions", "GitLab CI", "Jenkins", "Buildkite"]),
    ("frontend framework", "frontend frameworks", ["React", "Vue", "Svelte", "Angular"]),
    ("deploy day", "deploy days", ["Monday", "Tuesday", "Wednesday", "Thursday"]),
    ("logging stack", "logging stacks", ["Loki", "Elasticsearch", "Datadog", "CloudWatch"]),
]
PREFS = [
    ("editor", ["Vim", "Emacs", "VS Code", "Helix", "IntelliJ"]),
    ("code review style", ["small pull requests", "pairing sessions", "written design notes first"]),
    ("meeting time", ["early mornings", "right after lunch", "late afternoons"]),
    ("language for scripts", ["Python", "Bash", "Go", "Ruby"]),
    ("coffee", ["espresso", "oat flat white", "green tea instead of coffee", "filter coffee"]),
]
HOBBIES = [("sailing", "Would {p} enjoy a sailing trip with the team?", "Yes"),
           ("rock climbing", "Would {p} be up for an indoor climbing evening?", "Yes"),
           ("baking sourdough", "Would {p} likely bring homemade bread to the potluck?", "Yes"),
           ("trail running", "Would {p} join a charity 10k run?", "Yes")]
NOISE = [
    "The {area} dashboard looked odd this morning.", "Has anyone here used {opt} in production before?",
    "I read a blog post comparing {opt} with the alternatives.", "{p}, can you share the {area} runbook?",
    "The {area} alerts were noisy overnight.", "We should document how the {area} is configured.",
    "{p} asked about the {area} budget.", "Is {opt} still on the list of things to look at?",
    "Everyone has a favourite {what}, it seems.", "{p} and I talked about {what} choices at lunch.",
]
ABSENCES = ["a conference in Lisbon", "parental leave", "a hiking holiday", "jury duty", "a family wedding"]
SMALL_TALK = [
    "Morning all, quick sync before standup.", "Thanks, that helps a lot.", "Sounds good to me.",
    "I'll pick that up after lunch.", "Can someone review my branch today?", "The build was slow again this morning.",
    "Let's keep the meeting short today.", "I'm still catching up on messages.", "Nice work on the release yesterday!",
    "Does anyone have the link to the dashboard?", "I'll write up the notes later.", "Agreed, let's revisit next week.",
    "Coffee break in ten minutes?", "The staging environment is back up.", "I left some comments on the ticket.",
]


def _date(d: datetime) -> str:
    """LoCoMo's session date format ("1:56 pm on 8 May, 2023")."""
    return d.strftime("%-I:%M %p on %-d %B, %Y").replace("AM", "am").replace("PM", "pm")


def team(rng: random.Random, idx: int, people: list[str], sessions: int) -> dict:
    start = datetime(2024, 1, 8, 9, 30) + timedelta(days=40 * idx)
    conv: dict = {"speaker_a": people[0], "speaker_b": people[1]}
    turns_by_session: list[list[dict]] = [[] for _ in range(sessions)]
    qa: list[dict] = []

    def place(session: int, speaker: str, text: str) -> str:
        turns = turns_by_session[session]
        dia = f"D{session + 1}:{len(turns) + 1}"
        turns.append({"speaker": speaker, "dia_id": dia, "text": text})
        return dia

    def chat(session: int, k: int) -> None:
        for _ in range(k):
            r = rng.random()
            if r < 0.5:
                text = rng.choice(SMALL_TALK)
            else:  # topical noise: the same areas, options and people, but no decision or fact
                area, _, options = rng.choice(AREAS)
                text = rng.choice(NOISE).format(area=area, opt=rng.choice(options), p=rng.choice(people),
                                                what=rng.choice(PREFS)[0])
            place(session, rng.choice(people + [ASSISTANT]), text)

    # decisions (some corrected later), spread over the sessions
    plan: dict[int, list] = {s: [] for s in range(sessions)}
    for area, noun, options in rng.sample(AREAS, 5):
        picks = rng.sample(options, 3)
        s1, s2, s3 = sorted(rng.sample(range(sessions), 3))
        who = rng.sample(people, 3)
        plan[s1].append(("decide", area, noun, picks, who))
        plan[s2].append(("against", area, noun, picks, who))
        plan[s3].append(("correct", area, noun, picks, who))
    for p in people:
        for what, options in rng.sample(PREFS, 2):
            plan[rng.randrange(sessions)].append(("pref", p, what, rng.choice(options)))
    for p, hobby in zip(rng.sample(people, 2), rng.sample(HOBBIES, 2), strict=True):
        plan[rng.randrange(sessions)].append(("hobby", p, hobby))
    for p in rng.sample(people, 2):
        plan[rng.randrange(sessions)].append(("absence", p, rng.choice(ABSENCES)))

    evidence: dict[tuple, str] = {}
    for s in range(sessions):
        chat(s, rng.randint(8, 14))
        for item in plan[s]:
            kind = item[0]
            if kind == "decide":
                _, area, noun, picks, who = item
                evidence[("decide", area)] = place(
                    s, who[0], f"Let's go with {picks[0]} as our {area}; it fits the team best.")
                chat(s, rng.randint(0, 2))
                evidence[("decide_ok", area)] = place(s, ASSISTANT, f"Noted: the team chose {picks[0]} for the {area}.")
            elif kind == "against":
                _, area, noun, picks, who = item
                evidence[("against", area)] = place(
                    s, who[1], f"We evaluated {picks[1]} as well, but decided against it for the {area}.")
            elif kind == "correct":
                _, area, noun, picks, who = item
                evidence[("correct", area)] = place(
                    s, who[2], f"Correction: we are switching from {picks[0]} to {picks[2]} for the {area} after all.")
            elif kind == "pref":
                _, p, what, value = item
                evidence[("pref", p, what)] = place(s, p, f"For the record, my preferred {what} is {value}.")
            elif kind == "hobby":
                _, p, (hobby, _, _) = item
                evidence[("hobby", p)] = place(s, p, f"I spent the whole weekend {hobby} again, it clears my head.")
            elif kind == "absence":
                _, p, why = item
                evidence[("absence", p)] = place(s, ASSISTANT, f"Reminder: {p} is away next week for {why}.")
            chat(s, rng.randint(2, 5))
    for s in range(sessions):
        day = start + timedelta(days=3 * s, minutes=rng.randint(0, 300))
        conv[f"session_{s + 1}"] = turns_by_session[s]
        conv[f"session_{s + 1}_date_time"] = _date(day)

    # questions with their known evidence
    for s in range(sessions):
        for item in plan[s]:
            kind = item[0]
            if kind == "decide":
                _, area, noun, picks, who = item
                qa.append({"question": f"When did the team decide on the {area}?", "answer": picks[0],
                           "evidence": [evidence[("decide", area)]], "category": 2})
                qa.append({"question": f"Which {noun} did the team consider or decide on?",
                           "answer": ", ".join(picks), "category": 1,
                           "evidence": [evidence[("decide", area)], evidence[("against", area)],
                                        evidence[("correct", area)]]})
                qa.append({"question": f"What {area} does the team use now?", "answer": picks[2],
                           "evidence": [evidence[("correct", area)]], "category": 4})
            elif kind == "pref":
                _, p, what, value = item
                qa.append({"question": rng.choice([f"What is {p}'s preferred {what}?",
                                                   f"Which {what} does {p} like best?",
                                                   f"What {what} would {p} pick?"]), "answer": value,
                           "evidence": [evidence[("pref", p, what)]], "category": 4})
            elif kind == "hobby":
                _, p, (hobby, q, a) = item
                qa.append({"question": q.format(p=p), "answer": a, "evidence": [evidence[("hobby", p)]],
                           "category": 3})
            elif kind == "absence":
                _, p, why = item
                qa.append({"question": f"Why is {p} away next week?", "answer": why,
                           "evidence": [evidence[("absence", p)]], "category": 4})
    prefs = [k for k in evidence if k[0] == "pref"]
    for a, b in zip(prefs[0::2], prefs[1::2], strict=False):
        qa.append({"question": f"What are {a[1]}'s preferred {a[2]} and {b[1]}'s preferred {b[2]}?",
                   "answer": "", "evidence": [evidence[a], evidence[b]], "category": 1})
    return {"sample_id": f"team-{idx + 1}", "conversation": conv, "qa": qa}


def generate(seed: int, teams: int, sessions: int) -> list[dict]:
    """The data set: ``teams`` conversations of ``sessions`` sessions each (deterministic in ``seed``)."""
    rng = random.Random(seed)
    return [team(rng, i, PEOPLE[i % len(PEOPLE)], sessions) for i in range(teams)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--teams", type=int, default=5)
    ap.add_argument("--sessions", type=int, default=15)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    data = generate(args.seed, args.teams, args.sessions)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    n_turns = sum(len(v) for d in data for k, v in d["conversation"].items() if k.startswith("session_")
                  and not k.endswith("date_time"))
    print(f"wrote {out}: {len(data)} conversations, {n_turns} turns, {sum(len(d['qa']) for d in data)} questions")


if __name__ == "__main__":
    main()
