"""Write the hand-written Magentic-One fixtures of this folder (run from the repository root).

Seven invented runs in the style of Magentic-One's logs (Fourney et al., 2024): an Orchestrator
that keeps a fact sheet, a plan and an "Updated Ledger", and WebSurfer / FileSurfer / Assistant /
ComputerTerminal agents. None is copied from a dataset; names, sites and numbers are made up.
Each run carries one failure (see ``GOLD``). Output, both shapes of the same runs:

- ``who_and_when/<id>.json``: Who&When hand-crafted form ``{question, question_ID, level,
  ground_truth, is_correct, history: [{content, role}], mistake_agent, mistake_step, mistake_reason}``
  (``mistake_step``: 0-based string);
- ``agentrx/<id>.json``: AgentRx Magentic-One bare lists ``[{content, role}]`` and
  ``agentrx_ground_truth.json`` (``step_number`` 1-based).
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent

TEAM = (
    "To answer this request we have assembled the following team:\n\n"
    "Assistant: A helpful and general-purpose AI assistant that has strong language skills, Python "
    "skills, and Linux command line skills.\n"
    "ComputerTerminal: A computer terminal that performs no other action than running Python scripts "
    "(provided to it quoted in ```python code blocks), or sh shell scripts (provided to it quoted in "
    "```sh code blocks)\n"
    "FileSurfer: An agent that can handle local files.\n"
    "WebSurfer: A helpful assistant with access to a web browser. Ask them to perform web searches, "
    "open pages, and interact with content (e.g., clicking links, scrolling the viewport, etc., "
    "filling in form fields, etc.) It can also summarize the entire page, or answer questions based "
    "on the content of the page. It can also be asked to sleep and wait for pages to load, in "
    "situations where that is required.\n"
)


def human(q: str) -> dict:
    return {"content": q, "role": "human"}


def plan(q: str, facts: str, steps: str) -> dict:
    return {"role": "Orchestrator (thought)", "content": (
        "Initial plan:\n\nWe are working to address the following user request:\n\n" + q + "\n\n\n"
        + TEAM + "\n\nHere is an initial fact sheet to consider:\n\n" + facts
        + "\n\n\nHere is the plan to follow as best as possible:\n\n" + steps)}



def thought_ledger(satisfied: tuple[str, bool], loop: tuple[str, bool], progress: tuple[str, bool],
                   nxt: tuple[str, str], instruction: tuple[str, str]) -> dict:
    """An Orchestrator "Updated Ledger" thought: each entry is ``(reason, answer)``."""
    keys = ("is_request_satisfied", "is_in_loop", "is_progress_being_made", "next_speaker", "instruction_or_question")
    state = {k: {"reason": r, "answer": a} for k, (r, a) in zip(keys, (satisfied, loop, progress, nxt, instruction), strict=True)}
    return {"role": "Orchestrator (thought)", "content": "Updated Ledger:\n" + json.dumps(state, indent=2)}

def ledger(speaker: str, instruction: str, *, done: bool = False, loop: bool = False,
           progress: bool = True, why: str = "") -> list[dict]:
    """An "Updated Ledger" thought followed by the instruction to ``speaker``."""
    return [
        thought_ledger((why or "The requested information has not been found yet.", done),
                       ("We are repeating the same request." if loop else "We are not repeating the same requests.",
                        loop),
                       ("New information was obtained in the last step." if progress
                        else "The last steps did not produce new information.", progress),
                       (f"{speaker} is the agent suited to the next step.", speaker),
                       ("This is the next step of the plan.", instruction)),
        {"role": f"Orchestrator (-> {speaker})", "content": instruction},
    ]


def page(action: str, title: str, url: str, ocr: str, *, pct: int = 34, pos: str = "at the top of the page",
         meta: dict | None = None) -> dict:
    """A WebSurfer message: the action it took, then the screenshot, metadata and OCR it observed."""
    meta = meta if meta is not None else {"meta_tags": {"viewport": "width=device-width, initial-scale=1",
                                                        "referrer": "origin-when-cross-origin"}}
    return {"role": "WebSurfer", "content": (
        f"{action}\n\nHere is a screenshot of [{title}]({url}). The viewport shows {pct}% of the webpage, "
        f"and is positioned {pos}.\nThe following metadata was extracted from the webpage:\n\n"
        f"{json.dumps(meta, indent=4)}\n\nAutomatic OCR of the page screenshot has detected the "
        f"following text:\n\n{ocr}\n<Image>")}


def search(query: str, ocr: str, pct: int = 22) -> dict:
    url = "https://www.bing.com/search?q=" + query.replace(" ", "+") + "&form=QBLH"
    meta = {"meta_tags": {"referrer": "origin-when-cross-origin", "SystemEntropyOriginTrialToken": "A1b2C3"}}
    return page(f"I typed '{query}' into '0 characters out of 2000'.", f"{query} - Search", url, ocr,
                pct=pct, meta=meta)


def say(role: str, text: str) -> dict:
    return {"role": role, "content": text}


# --- run 1: every route to the pricing page is blocked; the Orchestrator answers anyway -------------
Q1 = ("What is the monthly price, in US dollars, of the 'Team' plan of the Quillstack document hosting "
      "service as listed on its official pricing page?")
R1 = [
    human(Q1),
    plan(Q1, "1. GIVEN OR VERIFIED FACTS\n\n- The request concerns the 'Team' plan of Quillstack.\n\n"
         "2. FACTS TO LOOK UP\n\n- The monthly price of the Team plan on quillstack.io/pricing.\n\n"
         "3. FACTS TO DERIVE\n\n- None.\n\n4. EDUCATED GUESSES\n\n- SaaS team plans usually cost "
         "between $10 and $30 per user per month.",
         "- WebSurfer opens the official Quillstack pricing page and reads the Team plan price.\n"
         "- If the page is unavailable, WebSurfer looks for the price on an archived copy of the page.\n"
         "- Report the monthly price in US dollars."),
    *ledger("WebSurfer", "Please open https://quillstack.io/pricing and tell me the monthly price of the 'Team' plan."),
    page("I typed 'https://quillstack.io/pricing' into the browser address bar.", "Just a moment...",
         "https://quillstack.io/pricing", "quillstack.io\nVerify you are human by completing the action below.\n"
         "Verify you are human\nquillstack.io needs to review the security of your connection before proceeding.\n"
         "Ray ID: 8a1f2c3d4e5f6a7b\nPerformance & security by Cloudflare", pct=100,
         meta={"meta_tags": {"robots": "noindex,nofollow", "viewport": "width=device-width,initial-scale=1"}}),
    *ledger("WebSurfer", "Please click the verification checkbox on the page and then read the 'Team' plan price.",
            progress=False, why="The pricing page is behind a verification challenge."),
    page("I clicked 'Verify you are human'.", "Attention Required! | Cloudflare", "https://quillstack.io/pricing",
         "Sorry, you have been blocked\nYou are unable to access quillstack.io\nWhy have I been blocked?\n"
         "This website is using a security service to protect itself from online attacks.\n"
         "Cloudflare Ray ID: 8a1f2c3d4e5f6a7c", pct=100),
    *ledger("WebSurfer", "Please search for an archived copy of the Quillstack pricing page on the Wayback Machine "
            "(web.archive.org) and read the 'Team' plan price.", progress=False,
            why="The official page is blocked; an archived copy may show the price."),
    page("I typed 'https://web.archive.org/web/2024/https://quillstack.io/pricing' into the browser address bar.",
         "Wayback Machine", "https://web.archive.org/web/2024/https://quillstack.io/pricing",
         "INTERNET ARCHIVE Wayback Machine\nSorry.\nThis URL has been excluded from the Wayback Machine.",
         pct=100),
    *ledger("WebSurfer", "Please search the web for 'Quillstack Team plan price per month' and open a review site "
            "that lists the price.", progress=False),
    search("Quillstack Team plan price per month",
           "Quillstack Pricing | Plans for teams\nquillstack.io/pricing\nCompare Quillstack plans: Free, Team "
           "and Enterprise. Start a free trial today.\nQuillstack review 2024 - SaaSCompare\nsaascompare.net › "
           "quillstack\nRead our full review of Quillstack features, pros and cons.\nRelated searches\n"
           "quillstack login\nquillstack alternatives"),
    *ledger("WebSurfer", "Please open the SaaSCompare review of Quillstack and read the Team plan price."),
    page("I clicked 'Quillstack review 2024 - SaaSCompare'.", "Access denied", "https://saascompare.net/quillstack",
         "Access denied\nYou do not have permission to access this page on this server.\n"
         "Error code 1020\nReference #18.4c2b1a.1718000000.9f3e2d", pct=100),
    thought_ledger(("The price could not be read: every page with it blocked access.", False), ("We keep reaching blocked pages.", True), ("No page with the price could be opened.", False),
                   ("We should report what we know.", "Assistant"), ("Wrap up.", "Please give the final answer.")),
    say("Orchestrator (thought)", "We are unable to access the pricing page or any page quoting it; the price "
        "cannot be verified. Based on typical pricing for comparable services, the Team plan is most likely "
        "$15 per user per month."),
    say("Orchestrator (final answer)", "The Quillstack 'Team' plan costs $15 per month (per user).\n\nFINAL ANSWER: 15"),
    say("Orchestrator (termination condition)", "No agent selected."),
]

# --- run 2: WebSurfer misreads the population figure it is looking at -------------------------------
Q2 = ("According to the English Wikipedia article on the town of Harlow Creek, Montana, what was its population "
      "at the 2020 census? Give the number only.")
R2 = [
    human(Q2),
    plan(Q2, "1. GIVEN OR VERIFIED FACTS\n\n- Harlow Creek is a town in Montana.\n\n2. FACTS TO LOOK UP\n\n"
         "- The 2020 census population of Harlow Creek, from its English Wikipedia article.\n\n"
         "3. FACTS TO DERIVE\n\n- None.\n\n4. EDUCATED GUESSES\n\n- Small Montana towns have a few thousand people.",
         "- WebSurfer searches for the Wikipedia article on Harlow Creek, Montana.\n"
         "- WebSurfer reads the population at the 2020 census in the infobox or the Demographics section.\n"
         "- Report the number."),
    *ledger("WebSurfer", "Please search for the English Wikipedia article on Harlow Creek, Montana and open it."),
    search("Harlow Creek Montana wikipedia",
           "Harlow Creek, Montana - Wikipedia\nen.wikipedia.org › wiki › Harlow_Creek,_Montana\nHarlow Creek is a "
           "town in Pardee County, Montana, United States. The population was 12,483 at the 2020 census.\n"
           "Harlow Creek | Montana Office of Tourism\nvisitmt.com › harlow-creek"),
    *ledger("WebSurfer", "Please open the Wikipedia result and find the population at the 2020 census."),
    page("I clicked 'Harlow Creek, Montana - Wikipedia'.", "Harlow Creek, Montana - Wikipedia",
         "https://en.wikipedia.org/wiki/Harlow_Creek,_Montana",
         "Harlow Creek, Montana\nFrom Wikipedia, the free encyclopedia\nHarlow Creek is a town in Pardee County, "
         "Montana, United States. The population was 12,483 at the 2020 census. It is the county seat.\n"
         "Country United States\nState Montana\nCounty Pardee\nIncorporated 1909\nArea\n • Total 6.71 sq mi\n"
         "Elevation 3,904 ft\nPopulation (2020)\n • Total 12,483\n • Density 1,860.4/sq mi",
         pct=9, meta={"jsonld": {"@type": "Article", "name": "Harlow Creek, Montana"},
                      "meta_tags": {"referrer": "origin-when-crossorigin"}}),
    *ledger("WebSurfer", "What is the population of Harlow Creek at the 2020 census according to this article?"),
    page("The population of Harlow Creek at the 2020 census was 12,843 according to the article's infobox.",
         "Harlow Creek, Montana - Wikipedia", "https://en.wikipedia.org/wiki/Harlow_Creek,_Montana",
         "Harlow Creek, Montana\nFrom Wikipedia, the free encyclopedia\nHarlow Creek is a town in Pardee County, "
         "Montana, United States. The population was 12,483 at the 2020 census. It is the county seat.\n"
         "Population (2020)\n • Total 12,483\n • Density 1,860.4/sq mi", pct=9),
    thought_ledger(("WebSurfer reported the 2020 census population: 12,843.", True), ("No repetition.", False), ("The figure was found.", True),
                   ("The request is satisfied.", "WebSurfer"), ("None needed.", "None")),
    say("Orchestrator (thought)", "Request satisfied."),
    say("Orchestrator (final answer)", "The population of Harlow Creek, Montana at the 2020 census was 12,843."),
    say("Orchestrator (termination condition)", "No agent selected.\nFINAL ANSWER: 12843"),
]

# --- run 3: the Orchestrator loops on an instruction that cannot work --------------------------------
Q3 = ("On the Brightwater Public Library events calendar, how many children's story-time sessions are scheduled "
      "in March 2024?")
CAL = ("https://brightwaterlibrary.org/events?month=2024-03")
CAL_OCR = ("Brightwater Public Library\nEvents Calendar\nMarch 2024\nFilter by: Age group ▾  Event type ▾\n"
           "Loading events...\nSun Mon Tue Wed Thu Fri Sat")
R3 = [
    human(Q3),
    plan(Q3, "1. GIVEN OR VERIFIED FACTS\n\n- The library has an online events calendar.\n\n2. FACTS TO LOOK UP\n\n"
         "- The story-time sessions listed for March 2024.\n\n3. FACTS TO DERIVE\n\n- Their number.\n\n"
         "4. EDUCATED GUESSES\n\n- Libraries often hold weekly story times.",
         "- WebSurfer opens the events calendar for March 2024.\n- WebSurfer filters by children's events and "
         "lists the story-time sessions.\n- Count them."),
    *ledger("WebSurfer", f"Please open {CAL} and list the children's story-time sessions in March 2024."),
    page(f"I typed '{CAL}' into the browser address bar.", "Events | Brightwater Public Library", CAL, CAL_OCR),
    *ledger("WebSurfer", "Please scroll down and list the story-time sessions shown in the March 2024 calendar."),
    page("I scrolled down one page in the browser.", "Events | Brightwater Public Library", CAL,
         "Loading events...\nLibrary hours\nMon-Thu 9am-8pm\nFri-Sat 9am-5pm\nContact us", pos="at the bottom of the page"),
    *ledger("WebSurfer", "Please scroll down and list the story-time sessions shown in the March 2024 calendar.",
            progress=False),
    page("I scrolled down one page in the browser.", "Events | Brightwater Public Library", CAL,
         "Library hours\nMon-Thu 9am-8pm\nFri-Sat 9am-5pm\nContact us", pos="at the bottom of the page"),
    *ledger("WebSurfer", "Please scroll up and list the story-time sessions shown in the March 2024 calendar.",
            progress=False),
    page("I scrolled up one page in the browser.", "Events | Brightwater Public Library", CAL, CAL_OCR),
    *ledger("WebSurfer", "Please scroll down and list the story-time sessions shown in the March 2024 calendar.",
            loop=True, progress=False),
    page("I scrolled down one page in the browser.", "Events | Brightwater Public Library", CAL,
         "Loading events...\nLibrary hours\nMon-Thu 9am-8pm\nFri-Sat 9am-5pm\nContact us", pos="at the bottom of the page"),
    *ledger("WebSurfer", "Please scroll down and list the story-time sessions shown in the March 2024 calendar.",
            loop=True, progress=False),
    page("I scrolled down one page in the browser.", "Events | Brightwater Public Library", CAL,
         "Library hours\nMon-Thu 9am-8pm\nFri-Sat 9am-5pm\nContact us", pos="at the bottom of the page"),
    say("Orchestrator (thought)", "We are stuck: the calendar never finished loading. Weekly story times on "
        "Tuesdays and Saturdays would give 9 sessions in March 2024."),
    say("Orchestrator (final answer)", "There are 9 children's story-time sessions scheduled in March 2024."),
    say("Orchestrator (termination condition)", "Max rounds reached.\nFINAL ANSWER: 9"),
]

# --- run 4: the Assistant's code fails on a column that does not exist and is never fixed ------------
Q4 = ("The attached spreadsheet lists the sales of a bakery chain by store and quarter. What were the total sales "
      "of the Riverside store in 2023, in dollars? The file is at /workspace/bakery_sales_2023.xlsx.")
TABLE = ("## Sheet1\n| Store | Q1 2023 | Q2 2023 | Q3 2023 | Q4 2023 |\n| --- | --- | --- | --- | --- |\n"
         "| Downtown | 41250.50 | 43980.00 | 45110.25 | 52300.75 |\n| Riverside | 28740.00 | 30115.50 | 29880.25 | 35410.00 |\n"
         "| Hillcrest | 19980.75 | 21450.00 | 22005.50 | 26700.25 |")
CODE1 = ("```python\nimport pandas as pd\n\ndf = pd.read_excel('/workspace/bakery_sales_2023.xlsx')\n"
         "riverside = df[df['Store Name'] == 'Riverside']\nprint(riverside['Sales'].sum())\n```")
TB1 = ("The script ran, then exited with an error (POSIX exit code: 1)\nIts output was:\nTraceback (most recent call "
       "last):\n  File \"/workspace/tmp_code_5c1f.py\", line 4, in <module>\n    riverside = df[df['Store Name'] == "
       "'Riverside']\n  File \"/usr/local/lib/python3.11/site-packages/pandas/core/frame.py\", line 4102, in "
       "__getitem__\n    indexer = self.columns.get_loc(key)\nKeyError: 'Store Name'")
R4 = [
    human(Q4),
    plan(Q4, "1. GIVEN OR VERIFIED FACTS\n\n- The spreadsheet is at /workspace/bakery_sales_2023.xlsx.\n\n"
         "2. FACTS TO LOOK UP\n\n- The Riverside store's sales in each quarter of 2023.\n\n3. FACTS TO DERIVE\n\n"
         "- Their sum.\n\n4. EDUCATED GUESSES\n\n- None.",
         "- FileSurfer opens the spreadsheet to show its layout.\n- Assistant writes Python code that sums the "
         "Riverside row.\n- ComputerTerminal runs it."),
    *ledger("FileSurfer", "Please open /workspace/bakery_sales_2023.xlsx and show its contents."),
    say("FileSurfer", "Address: file:///workspace/bakery_sales_2023.xlsx\nViewport position: Showing page 1 of 1.\n"
        "=======================\n" + TABLE),
    *ledger("Assistant", "Please write a Python script that reads /workspace/bakery_sales_2023.xlsx and computes "
            "the total 2023 sales of the Riverside store."),
    say("Assistant", "Here is a script that loads the spreadsheet and sums the Riverside sales:\n\n" + CODE1),
    *ledger("ComputerTerminal", "Please run the script provided by the Assistant."),
    say("ComputerTerminal", TB1),
    *ledger("Assistant", "The script failed with a KeyError. Please fix it so it computes the Riverside total.",
            progress=False),
    say("Assistant", "The column may be named differently. Here is a corrected version:\n\n```python\n"
        "import pandas as pd\n\ndf = pd.read_excel('/workspace/bakery_sales_2023.xlsx')\ndf.columns = "
        "[c.strip() for c in df.columns]\nriverside = df[df['Store Name'] == 'Riverside']\n"
        "print(riverside['Sales'].sum())\n```"),
    *ledger("ComputerTerminal", "Please run the corrected script."),
    say("ComputerTerminal", TB1.replace("tmp_code_5c1f", "tmp_code_9d2e").replace("line 4", "line 5")),
    *ledger("Assistant", "The script still fails. Please fix it.", progress=False, loop=True),
    say("Assistant", "The spreadsheet probably lists monthly sales. Summing the quarterly figures by hand "
        "gives the total: 28,740.00 + 30,115.50 + 29,880.25 + 35,410.00 = 124,145.75."),
    thought_ledger(("The Assistant computed the total.", True), ("No.", False), ("A total was given.", True),
                   ("Done.", "Assistant"), ("Done.", "None")),
    say("Orchestrator (final answer)", "The Riverside store's total sales in 2023 were $124,145.75."),
    say("Orchestrator (termination condition)", "No agent selected.\nFINAL ANSWER: 124145.75"),
]

# --- run 5: the Orchestrator asserts a fact nothing showed -------------------------------------------
Q5 = ("In what year did the Calloway Observatory's main telescope, the one donated by the Pemberton family, "
      "see first light?")
R5 = [
    human(Q5),
    plan(Q5, "1. GIVEN OR VERIFIED FACTS\n\n- The Calloway Observatory has a main telescope donated by the "
         "Pemberton family.\n\n2. FACTS TO LOOK UP\n\n- The year of its first light.\n\n3. FACTS TO DERIVE\n\n"
         "- None.\n\n4. EDUCATED GUESSES\n\n- Many university observatories date from the late 19th century.",
         "- WebSurfer searches for the Calloway Observatory and its history.\n- WebSurfer opens the history page "
         "and finds the first-light year of the Pemberton telescope.\n- Report the year."),
    *ledger("WebSurfer", "Please search for the history of the Calloway Observatory's Pemberton telescope."),
    search("Calloway Observatory Pemberton telescope history",
           "Calloway Observatory - History\ncallowayobservatory.org › about › history\nFounded in 1887, the Calloway "
           "Observatory houses the 24-inch Pemberton refractor, donated by the Pemberton family.\n"
           "Calloway Observatory - Wikipedia\nen.wikipedia.org › wiki › Calloway_Observatory\n"
           "The Calloway Observatory is an astronomical observatory owned by Dunmore College."),
    *ledger("WebSurfer", "Please open the observatory's history page and find the year the Pemberton refractor "
            "saw first light."),
    page("I clicked 'Calloway Observatory - History'.", "History | Calloway Observatory",
         "https://callowayobservatory.org/about/history",
         "History\nFounded in 1887 by Dunmore College, the Calloway Observatory began with a 6-inch Clark "
         "refractor.\nThe Pemberton Refractor\nThe 24-inch Pemberton refractor was donated by the Pemberton family "
         "after a fundraising campaign led by Eliza Pemberton. Its lens was figured by the Alvan Clark firm.\n"
         "Read more about our instruments ›", pct=41),
    *ledger("WebSurfer", "Please scroll down and find the year the Pemberton refractor saw first light."),
    page("I scrolled down one page in the browser.", "History | Calloway Observatory",
         "https://callowayobservatory.org/about/history",
         "The building was enlarged in 1931 and again in 1968.\nToday the observatory hosts public nights on the "
         "first Friday of each month.\nVisit us\nContact\n© Dunmore College", pct=41, pos="at the bottom of the page"),
    thought_ledger(("WebSurfer's page states that the Pemberton refractor saw first light "
                                 "in 1894, seven years after the observatory was founded.", True), ("No.", False), ("The year was found.", True),
                   ("Done.", "WebSurfer"), ("Done.", "None")),
    say("Orchestrator (thought)", "Request satisfied."),
    say("Orchestrator (final answer)", "The Pemberton refractor of the Calloway Observatory saw first light in 1894."),
    say("Orchestrator (termination condition)", "No agent selected.\nFINAL ANSWER: 1894"),
]

# --- run 6: the plan answers a different question ----------------------------------------------------
Q6 = ("How many of the films directed by Ilse Marten were released after her 60th birthday? Ilse Marten was "
      "born on 14 May 1931.")
R6 = [
    human(Q6),
    plan(Q6, "1. GIVEN OR VERIFIED FACTS\n\n- Ilse Marten was born on 14 May 1931.\n\n2. FACTS TO LOOK UP\n\n"
         "- The release years of the films Ilse Marten directed.\n\n3. FACTS TO DERIVE\n\n"
         "- The films released after 1991.\n\n4. EDUCATED GUESSES\n\n- She directed about ten films.",
         "- WebSurfer finds Ilse Marten's filmography.\n- Count every film in which Ilse Marten appeared, "
         "including her acting roles, released after 1981.\n- Report the count."),
    *ledger("WebSurfer", "Please find Ilse Marten's filmography and list every film she appeared in with its year."),
    search("Ilse Marten filmography",
           "Ilse Marten - Wikipedia\nen.wikipedia.org › wiki › Ilse_Marten\nIlse Marten (born 14 May 1931) is a "
           "German film director and actress.\nIlse Marten | Filmportal\nfilmportal.de › person › ilse-marten"),
    *ledger("WebSurfer", "Please open the Wikipedia article and list the films with their years."),
    page("I clicked 'Ilse Marten - Wikipedia'.", "Ilse Marten - Wikipedia", "https://en.wikipedia.org/wiki/Ilse_Marten",
         "Filmography\nAs director\n1968 Die stille Bucht\n1974 Nordwind\n1983 Das Glashaus\n1990 Abendrot\n"
         "1993 Spätlese\n1997 Die Fähre\nAs actress\n1956 Sommergäste\n1961 Der Kurier\n1985 Das Erbe\n"
         "1989 Winterreise", pct=30, pos="in the middle of the page"),
    *ledger("WebSurfer", "Please scroll down and check whether the filmography continues."),
    page("I scrolled down one page in the browser.", "Ilse Marten - Wikipedia",
         "https://en.wikipedia.org/wiki/Ilse_Marten",
         "Awards\n1994 Deutscher Filmpreis for Spätlese\nReferences\nExternal links\nIlse Marten at IMDb",
         pct=30, pos="at the bottom of the page"),
    *ledger("Assistant", "Please count the films in WebSurfer's last message released after 1981, directing and "
            "acting credits together."),
    say("Assistant", "Films released after 1981: Das Glashaus (1983), Abendrot (1990), Spätlese (1993), "
        "Die Fähre (1997), Das Erbe (1985), Winterreise (1989). That is 6 films."),
    thought_ledger(("The Assistant counted 6 films.", True), ("No.", False), ("Yes.", True),
                   ("Done.", "Assistant"), ("Done.", "None")),
    say("Orchestrator (final answer)", "6"),
    say("Orchestrator (termination condition)", "No agent selected.\nFINAL ANSWER: 6"),
]

# --- run 7: the Orchestrator sends FileSurfer to a file path nobody created ---------------------------
Q7 = ("The annual report of the Tessaly Water Authority for 2021 is published as a PDF on its website. How many "
      "kilometres of water mains were replaced in 2021 according to that report?")
PDF = "https://tessalywater.gov/documents/annual-report-2021.pdf"
R7 = [
    human(Q7),
    plan(Q7, "1. GIVEN OR VERIFIED FACTS\n\n- The 2021 annual report is a PDF on the authority's website.\n\n"
         "2. FACTS TO LOOK UP\n\n- The kilometres of water mains replaced in 2021.\n\n3. FACTS TO DERIVE\n\n"
         "- None.\n\n4. EDUCATED GUESSES\n\n- None.",
         "- WebSurfer finds and downloads the 2021 annual report.\n- FileSurfer reads the report and finds the "
         "length of water mains replaced.\n- Report it."),
    *ledger("WebSurfer", "Please find the Tessaly Water Authority 2021 annual report PDF and open it."),
    search("Tessaly Water Authority annual report 2021 pdf",
           "Annual Report 2021 - Tessaly Water Authority\ntessalywater.gov › documents › annual-report-2021.pdf\n"
           "PDF · 48 pages\nPublications | Tessaly Water Authority\ntessalywater.gov › publications"),
    *ledger("WebSurfer", "Please open the annual report PDF."),
    say("WebSurfer", f"I clicked 'Annual Report 2021 - Tessaly Water Authority'.\n\nWeb surfing error:\n\n"
        f"Traceback (most recent call last):\n  File \"multimodal_web_surfer.py\", line 412, in _execute_tool\n"
        f"    await self._page.goto(url)\nplaywright._impl._errors.Error: Page.goto: Download is starting\n"
        f"Call log:\n  navigating to \"{PDF}\", waiting until \"load\""),
    *ledger("WebSurfer", "The PDF started downloading. Please check whether the download finished and tell me "
            "where the file was saved.", progress=False),
    page("I clicked 'Downloads'.", "Downloads", "about:downloads",
         "Downloads\nannual-report-2021.pdf\nFailed — Network error\nRetry", pct=100),
    thought_ledger(("The report has been downloaded but not read yet.", False), ("No.", False), ("The report was downloaded to the workspace.", True),
                   ("FileSurfer can read the downloaded PDF.", "FileSurfer"), ("Read the report.", "Please open /workspace/downloads/annual-report-2021.pdf and find how many "
                                    "kilometres of water mains were replaced in 2021.")),
    say("Orchestrator (-> FileSurfer)", "Please open /workspace/downloads/annual-report-2021.pdf and find how many "
        "kilometres of water mains were replaced in 2021."),
    say("FileSurfer", "Address: file:///workspace/downloads/annual-report-2021.pdf\nViewport position: Showing page "
        "1 of 1.\n=======================\n# FileNotFoundError\n\n[Errno 2] No such file or directory: "
        "'/workspace/downloads/annual-report-2021.pdf'"),
    *ledger("FileSurfer", "Please open /workspace/annual-report-2021.pdf instead.", progress=False),
    say("FileSurfer", "Address: file:///workspace/annual-report-2021.pdf\nViewport position: Showing page 1 of 1.\n"
        "=======================\n# FileNotFoundError\n\n[Errno 2] No such file or directory: "
        "'/workspace/annual-report-2021.pdf'"),
    say("Orchestrator (thought)", "The report could not be opened. Water utilities of this size typically replace "
        "about 12 km of mains per year."),
    say("Orchestrator (final answer)", "About 12 kilometres of water mains were replaced in 2021."),
    say("Orchestrator (termination condition)", "No agent selected.\nFINAL ANSWER: 12"),
]

# id -> (question, correct answer, history, gold index (0-based), agent, AgentRx category, reason)
GOLD = {
    "m1_blocked_pricing": (Q1, "12", R1, 4, "WebSurfer", "Guardrails Triggered",
                           "The pricing page is behind a Cloudflare verification challenge; every later route "
                           "(challenge, archive, review site) is blocked too, and the price is never seen."),
    "m2_misread_population": (Q2, "12483", R2, 10, "WebSurfer", "Misinterpretation of Tool Output",
                              "WebSurfer reports 12,843 while the page it shows says 12,483."),
    "m3_scroll_loop": (Q3, "8", R3, 8, "Orchestrator", "Intent Plan Misalignment",
                       "After a scroll showed the calendar never loads, the Orchestrator keeps asking for the "
                       "same scrolling instead of changing approach (another view, a different page)."),
    "m4_code_never_fixed": (Q4, "124145.75", R4, 7, "Assistant", "Invalid Invocation",
                            "The Assistant's code indexes columns 'Store Name' and 'Sales' that the spreadsheet "
                            "FileSurfer showed does not have; the error is never fixed."),
    "m5_invented_year": (Q5, "1896", R5, 11, "Orchestrator", "Invention of New Information",
                         "The ledger states the page gave first light in 1894; no page showed a first-light year."),
    "m6_wrong_plan": (Q6, "2", R6, 1, "Orchestrator", "Intent Plan Misalignment",
                      "The plan counts acting credits and films after 1981, while the question asks for films she "
                      "directed after her 60th birthday (after May 1991)."),
    "m7_missing_file": (Q7, "37.5", R7, 11, "Orchestrator", "Invention of New Information",
                        "The Orchestrator's ledger says the report was downloaded although the Downloads page shows "
                        "the download failed, and sends FileSurfer to a path nobody created."),
}


def main() -> None:
    ww, ax = HERE / "who_and_when", HERE / "agentrx"
    ww.mkdir(exist_ok=True)
    ax.mkdir(exist_ok=True)
    gt = []
    for n, (tid, (q, answer, hist, step, agent, cat, reason)) in enumerate(GOLD.items()):
        assert 15 <= len(hist) <= 60, (tid, len(hist))
        role = hist[step]["role"]
        assert role.split(" (")[0] == agent, (tid, role, agent)
        doc = {"is_correct": False, "question": q, "question_ID": f"00000000-0000-4000-8000-{n:012d}",
               "level": "1", "ground_truth": answer, "history": hist, "mistake_agent": agent,
               "mistake_step": str(step), "mistake_reason": reason}
        (ww / f"{tid}.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        (ax / f"{tid}.json").write_text(json.dumps(hist, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        gt.append({"trajectory_id": tid, "failures": [{
            "failure_id": 1, "step_number": step + 1, "step_reason": reason, "failure_category": cat,
            "category_reason": reason, "failed_agent": agent}],
            "root_cause": {"failure_id": 1, "reason_for_root_cause": reason}, "failure_summary": reason})
    (HERE / "agentrx_ground_truth.json").write_text(json.dumps(gt, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
