"""Vocabulary of the synthetic paper generator (``topicpulse.synthetic``).

Everything here was written for topicpulse; nothing is taken from real papers. The research
themes (``themes.toml``: the words and phrases papers on each area use, with their
categories) carry enough of the catalogue's vocabulary (GRPO, reward models, RAG, diffusion,
speech LLMs, ...) that every catalogue topic matches some generated papers, and a few themes
(classic RL, general ML) are near misses for the RL topics. The generic sentence and title
templates below have ``{slots}`` the generator fills from one theme per paper. Lists are
written as ``|``-separated strings to keep them compact.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources


def _split(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split("|") if part.strip())


@dataclass(frozen=True, slots=True)
class Theme:
    """One research area: its arXiv categories, weight in the mix and words."""

    key: str
    weight: float  # share of all papers, relative to the other themes
    trend: float  # relative change of that share per week (0.03: +3% a week)
    primary: tuple[str, ...]  # primary categories (repeat one to make it likelier)
    cross: tuple[str, ...]  # categories papers of this theme are cross-listed to
    areas: tuple[str, ...]  # plural noun phrases: "large language models"
    topics: tuple[str, ...]  # what the field does: "reinforcement learning from human feedback"
    problems: tuple[str, ...]  # what is hard: "reward hacking during long training runs"
    methods: tuple[str, ...]  # an appositive after the method's name: "a ... that ..."
    parts: tuple[str, ...]  # components: "a learned verifier"
    tasks: tuple[str, ...]  # "mathematical reasoning"
    benches: tuple[str, ...]
    metrics: tuple[str, ...]
    heads: tuple[str, ...]  # title phrases, in title case


def _load_themes() -> tuple[Theme, ...]:
    text = (resources.files("topicpulse.synthetic") / "themes.toml").read_text("utf-8")
    return tuple(
        Theme(
            key=raw["key"],
            weight=float(raw["weight"]),
            trend=float(raw["trend"]),
            **{name: tuple(raw[name]) for name in _WORD_FIELDS},
        )
        for raw in tomllib.loads(text)["theme"]
    )


_WORD_FIELDS = ("primary", "cross", "areas", "topics", "problems", "methods", "parts", "tasks",
                "benches", "metrics", "heads")  # fmt: skip
THEMES = _load_themes()

# ------------------------------------------------------------------------------ sentences
OPENERS = _split(
    "{area} have become a standard tool for {task}, yet {problem} remains poorly understood.|"
    "Recent progress in {topic} has opened new possibilities for {task}.|"
    "{topic} is a promising route to better {task}, but it is often limited by {problem}.|"
    "Despite rapid advances in {topic}, {problem} is still an open challenge.|"
    "A growing line of work applies {topic} to {task}.|"
    "Progress on {task} increasingly depends on {topic}."
)
GAPS = _split(
    "Existing methods either depend on {part} or ignore {problem} altogether.|"
    "Most prior approaches treat {problem} as a secondary concern, which makes them brittle on "
    "{task}.|In practice, {problem} makes training unstable and results hard to reproduce.|"
    "It remains unclear how {problem} interacts with the scale of the underlying model.|"
    "Current evaluations rarely measure {problem}, so its effect on {task} is largely unknown."
)
CONTRIBUTIONS = _split(
    "In this paper, we propose {name}, {method}.|We introduce {name}, {method}.|"
    "To close this gap, we present {name}, which combines {part} with {part2}.|"
    "This work studies {problem} and proposes {name}, {method}."
)
DETAILS = _split(
    "{name} first builds {part} and then uses it to guide {topic}.|"
    "The key idea is to replace {part} with {part2}, which is far cheaper to obtain.|"
    "Unlike prior work, our approach needs neither {part} nor additional human annotation.|"
    "We also give a simple analysis that explains when {part} helps and when it hurts.|"
    "The method leaves the rest of the pipeline unchanged and adds less than {small}% compute.|"
    "We release a dataset of {count} examples annotated for {task}.|"
    "Both components can be added to existing {area} with a few lines of code."
)
EXPERIMENTS = _split(
    "Experiments on {bench}, {bench2} and {bench3} show that {name} improves {metric} by "
    "{gain} points over strong baselines.|"
    "Across {n} models from {size1} to {size2} parameters, {name} consistently outperforms "
    "{baseline} on {task}.|"
    "On a held-out test set, {name} reaches {pct}% on {task}, compared with {pct2}% for the best "
    "prior method.|"
    "We evaluate {name} on {n} benchmarks covering {task} and {task2}, where it matches or "
    "exceeds much larger systems."
)
# Sentences with LaTeX, as many real abstracts have; one goes into about one abstract in ten.
LATEX = _split(
    "The resulting procedure runs in $\\mathcal{{O}}(n \\log n)$ time for inputs of length $n$.|"
    "{name} yields a ${speedup}\\times$ speed-up with $<${small}\\% loss in {metric}.|"
    "We prove that the error decays as $O(1/\\sqrt{{T}})$ after $T$ updates.|"
    "With a temperature of $\\tau = 0.{small}$, {name} improves {metric} by {gain}\\%."
)
CLOSERS = _split(
    "Ablation studies confirm that {part} is responsible for most of the gain.|"
    "We also find that {finding}.|Our analysis further suggests that {finding}.|"
    "These results indicate that {problem} can be reduced without sacrificing {metric}.|"
    "Code and data are available at https://github.com/{handle}/{repo}.|"
    "We hope this work offers a practical baseline for future research on {topic}."
)
FINDINGS = _split(
    "the gains grow with model size|most remaining errors come from a handful of failure "
    "modes|performance saturates after a few thousand training steps|simple baselines stay "
    "surprisingly competitive when tuned carefully|improvements transfer to unseen domains|"
    "the benefit is largest on the hardest examples|data quality matters more than quantity"
)
BASELINES = _split(
    "standard fine-tuning|prompting baselines|the strongest open-weight baseline|prior "
    "state-of-the-art methods|larger proprietary models"
)
SIZES = _split("0.5B|1.5B|3B|7B|8B|14B|32B|70B")

# ------------------------------------------------------------------------------ titles
TITLES = _split(
    "{name}: {head} for {task}|{head} via {part}|Towards {adj} {head} for {task}|On the "
    "{property} of {head} in {task}|When Does {head} Help {task}?|Rethinking {head} for {task}|"
    "{adj} {head} with {part}|{name}: {adj} {head} at Scale|Do {area} Really Need {part}?|"
    "{head} Without {part}|{name}: Scaling {head} to {task}|Understanding {head} through {part}|"
    "{adj} {task} with {head}|{part} Is All You Need for {task}|{head} Meets {part}|"
    "Learning {part} for {adj} {task}"
)
HARD_TITLES = _split(
    "{name}: {head} with $\\alpha$-Divergence Regularization|"
    "{head} When $k < n$: A Sample-Complexity View|Q&A over {task}: {head} in Practice|"
    "{head} & {task}: Two Sides of One Coin|Naïve {head} Is a Strong Baseline|"
    "Beyond Accuracy — {head} for {task}|{head} for Zürich German and Other Dialects|"
    "$\\beta$-{name}: {head} with Tunable Trade-offs|{head} in <100 Lines of Code|"
    "{head} for 日本語 and 中文 Text|Élan: {adj} {head} for Café-Scale Compute"
)
ADJECTIVES = _split(
    "Scalable|Robust|Efficient|Stable|Data-Efficient|Adaptive|Principled|Faithful|Reliable|"
    "Lightweight|Unified|Generalizable"
)
PROPERTIES = _split("Limits|Stability|Robustness|Scaling Behaviour|Failure Modes|Sample Efficiency")
NAMES = _split(
    "Atlas|Prism|Beacon|Orbit|Lantern|Compass|Mosaic|Ripple|Spark|Tide|Harbor|Summit|Echo|"
    "Falcon|Quill|Canopy|Ember|Glacier|Kestrel|Maple|Nova|Onyx|Pulse|Relay|Sable|Thresh|"
    "Umbra|Vector|Weave|Zephyr|Cairn|Delta|Fathom|Gauge|Heron|Iris|Juniper|Lumen|Meridian"
)
NAME_SUFFIXES = ("", "", "", "", "-R1", "++", "-Zero", "-Lite", "-X", "2", "-V")

# ------------------------------------------------------------------------------ people
FIRST_NAMES = _split(
    "Wei|Jing|Hao|Yuxin|Mingyu|Xiaoyu|Zhiwei|Lei|Yang|Min-jun|Seo-yeon|Hiroshi|Yuki|Aarav|"
    "Priya|Rohan|Ananya|Arjun|Kavya|Mohammed|Fatima|Omar|Layla|Yusuf|Elena|Marco|Giulia|"
    "Luca|Sofia|Mateo|Lucía|José|Camila|Thomas|Anna|Jonas|Lena|Felix|Clara|Søren|Ingrid|"
    "Łukasz|Zoë|Chloé|François|Amélie|Pierre|Olga|Dmitri|Irina|Nikolai|Sarah|Michael|"
    "Emily|David|Jessica|Daniel|Laura|James|Rachel|Kwame|Amara|Chinedu|Thandiwe|Ayşe|Emre|"
    "Çağla|Nguyen|Linh|Minh|Siddharth|Noah|Maya|Ethan|Hannah|Gabriel|Isabela|Tomás|Ines"
)
SURNAMES = _split(
    "Wang|Wang|Wang|Li|Li|Li|Zhang|Zhang|Liu|Liu|Chen|Chen|Yang|Huang|Zhao|Wu|Zhou|Xu|Sun|"
    "Kim|Park|Lee|Choi|Tanaka|Suzuki|Sato|Sharma|Patel|Gupta|Iyer|Reddy|Singh|Khan|Haddad|"
    "Rahman|Nasser|Rossi|Bianchi|Romano|García|Fernández|López|Martínez|Silva|Santos|"
    "Müller|Schmidt|Schneider|Fischer|Weber|Becker|Dupont|Lefèvre|Moreau|Ivanov|Petrova|"
    "Kowalski|Nowak|Novák|Johansson|Nielsen|Ødegaard|Smith|Johnson|Brown|Miller|Davis|"
    "Wilson|Taylor|Anderson|Thompson|Okafor|Mensah|Nkosi|Yılmaz|Demir|Nguyễn|Tran|Pham"
)
INITIALS = "ABCDEFGHJKLMNPRSTW"

# ------------------------------------------------------------------------------ metadata
VENUES = _split(
    "ACL 2026|EMNLP 2025|NAACL 2025|NeurIPS 2025|ICLR 2026|ICML 2026|CVPR 2026|Interspeech "
    "2026|AAAI 2026|KDD 2026|SIGIR 2026|ICASSP 2026|COLM 2025|AISTATS 2026|CoRL 2025"
)
COMMENTS = _split(
    "{pages} pages, {figures} figures|Accepted at {venue}|Accepted to {venue}; {pages} pages|"
    "Preprint, under review|Code: https://github.com/{handle}/{repo}|{venue} camera-ready "
    "version|Work in progress; {pages} pages|{pages} pages, {figures} figures, {tables} tables"
)
JOURNALS = _split(
    "Transactions on Machine Learning Research, 2026|Proceedings of {venue}|IEEE/ACM "
    "Transactions on Audio, Speech, and Language Processing 34 (2026) {page}-{page2}|Journal "
    "of Artificial Intelligence Research 81 (2026) {page}-{page2}|Findings of {venue}"
)
DOIS = _split(
    "10.1145/3{d4}.3{d6}|10.1109/TASLP.2026.3{d6}|10.1016/j.artint.2026.10{d4}|"
    "10.18653/v1/2026.acl-long.{d3}|10.1613/jair.1.{d5}"
)

# Made-up institutions (none is meant to name a real one), one sometimes with an ampersand.
INSTITUTIONS = (
    "Northbridge Institute of Technology", "University of Eastvale", "Lakeshore AI Lab",
    "Ridgeview University", "Harborline Research", "Institute for Applied Reasoning",
    "Westmoor College", "Summit & Vale Labs", "Coastal Polytechnic", "Greyfield University",
    "Centre for Learning Systems", "Pinecrest Institute", "Meridian Data Lab",
    "University of Old Harbor", "Stonegate Research Centre", "Brightwater University",
)  # fmt: skip
