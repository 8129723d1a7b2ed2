"""The simulator's scripted wording: the words of the scripted agent and customers.

Every line the lettings simulator speaks, in both registers (formal and casual, the
simulator's ``DIALECTS``): what the agent says for each move, how it answers each objection,
and what the customer says in each situation of the call. Which line is said when is the
simulator's business (``trainers.moves.simulator``: ``scripted_reply``, ``scripted_customer_line``,
``episode_dialogue``); this module only holds the words, so they can be read and edited apart
from the world's dynamics.

Plain data that imports nothing: the simulator imports it, so it must not import the simulator.
Never imports Django.
"""

from __future__ import annotations

# --- The agent ---------------------------------------------------------------------------

AGENT_LINES: dict[tuple[str, str], str] = {
    ("greet", "formal"): (
        "Good afternoon, thank you for calling Levers9 Lettings. How may I help you today?"
    ),
    ("greet", "casual"): "Hi there! Thanks for getting in touch — what are you looking for?",
    ("give_details", "formal"): (
        "The property is a well-kept two-bedroom flat, available from the first of the "
        "month at £1,450 per calendar month, with a six-month minimum tenancy."
    ),
    ("give_details", "casual"): (
        "So it's a lovely two-bed, free from the start of the month — £1,450 a month, "
        "six-month minimum."
    ),
    ("confirm", "formal"): (
        "May I confirm that I have understood correctly: you are looking for two "
        "bedrooms, ideally moving in within the next two months?"
    ),
    ("confirm", "casual"): (
        "Just so I've got it right — two bedrooms, and you'd like to move in the next "
        "couple of months?"
    ),
    ("handle_objection", "formal"): (
        "I understand your concern, and it is a fair one. Let me explain what we can do."
    ),
    ("handle_objection", "casual"): "Totally get that — here's what we can do about it.",
    ("reassure", "formal"): (
        "Please rest assured: the landlord is responsive, the building is well managed, "
        "and we will be with you at every step."
    ),
    ("reassure", "casual"): (
        "Honestly, you'd be in good hands — the landlord's great and we'll help with everything."
    ),
    ("propose_viewing", "formal"): (
        "Would you like to arrange a viewing, so that you can see the property in person?"
    ),
    ("propose_viewing", "casual"): "Fancy popping round to have a look at it?",
    ("offer_slot", "formal"): (
        "I have availability on Thursday at 6 pm or Saturday at 11 am. Would either suit you?"
    ),
    ("offer_slot", "casual"): "I can do Thursday at 6 or Saturday at 11 — which works?",
    ("close", "formal"): (
        "Wonderful. I have booked your viewing and will send a confirmation by email. "
        "Is there anything else I can help with?"
    ),
    ("close", "casual"): (
        "Brilliant, you're booked in! I'll send the details over — anything else you need?"
    ),
}
"""(move, dialect) -> the scripted agent's line for the move."""

OBJECTION_ANSWERS: dict[tuple[str, str], str] = {
    ("price", "formal"): (
        "I understand the rent is a consideration. The price includes water and "
        "broadband, and the landlord may consider a longer tenancy at a lower rate."
    ),
    ("price", "casual"): (
        "Fair enough on the price — bills like water and broadband are included, and the "
        "landlord's open to a better rate on a longer let."
    ),
    ("timing", "formal"): (
        "I appreciate the timing matters. The move-in date is flexible by a couple of "
        "weeks, and we can hold the property with a holding deposit."
    ),
    ("timing", "casual"): (
        "No worries on timing — the move-in date can shift a couple of weeks, and we can "
        "hold it for you."
    ),
    ("family", "formal"): (
        "I understand that the children come first. The primary school is a short walk "
        "away and the garden is fully enclosed."
    ),
    ("family", "casual"): (
        "Makes sense with the kids — the primary school's a short walk and the garden's "
        "fully fenced."
    ),
}
"""(objection, dialect) -> the line that answers the customer's objection."""

# --- The customer ------------------------------------------------------------------------

CUSTOMER_LINES: dict[tuple[str, str], tuple[str, ...]] = {
    ("won", "formal"): (
        "Thank you, that is very helpful. I look forward to the viewing.",
        "Excellent, thank you. I shall see you then.",
    ),
    ("won", "casual"): ("Perfect, see you then — cheers!", "Brilliant, thanks so much!"),
    ("lost", "formal"): (
        "I am afraid I shall have to leave it there. Thank you for your time.",
        "I do not think this is for me, thank you.",
    ),
    ("lost", "casual"): (
        "Ah, I'll leave it for now, thanks.",
        "Sorry, got to run — I'll have a think.",
    ),
    ("opening", "formal"): (
        "Good afternoon. I am enquiring about the flat advertised on your website.",
        "Hello, I saw one of your properties listed and should like to know more.",
    ),
    ("opening", "casual"): (
        "Hiya, I saw the flat on your site — is it still going?",
        "Hey, calling about the two-bed you've got listed.",
    ),
    ("price", "formal"): (
        "To be frank, the rent is rather more than I had hoped to pay.",
        "I am concerned that the price is at the top of my budget.",
    ),
    ("price", "casual"): (
        "Hmm, that's a bit pricey for me, to be honest.",
        "That's more than I wanted to spend, if I'm honest.",
    ),
    ("timing", "formal"): (
        "The difficulty is timing: I need to move in sooner than that.",
        "I am not certain the dates will work with my notice period.",
    ),
    ("timing", "casual"): (
        "Thing is, I need somewhere by the end of the month.",
        "Not sure the dates line up with when I need to move.",
    ),
    ("family", "formal"): (
        "My main concern is whether it is suitable for the children.",
        "I need to be sure the area is right for my family.",
    ),
    ("family", "casual"): (
        "I'm just worried whether it's right for the kids.",
        "Is the area okay for a family, do you think?",
    ),
    ("closing", "formal"): ("Saturday at eleven would suit me well.",),
    ("closing", "casual"): ("Saturday at 11 works for me!",),
    ("viewing", "formal"): ("Yes, I should like to see it. When would be possible?",),
    ("viewing", "casual"): ("Yeah, I'd love to see it — when can I come round?",),
    ("cool", "formal"): (
        "I am not yet sure it is what I am looking for.",
        "Could you tell me a little more before I decide anything?",
    ),
    ("cool", "casual"): ("Hmm, not sure yet, to be honest.", "Tell me a bit more?"),
    # Keen, and asking nothing: no move of the scripted agent says what the rent includes or
    # whether the flat is furnished, so a question here went unanswered call after call.
    ("warm", "formal"): (
        "That sounds promising. Please do go on.",
        "That is helpful, thank you. I am interested.",
    ),
    ("warm", "casual"): ("Ooh, sounds good — go on.", "Nice, I like the sound of that."),
}
"""(situation, dialect) -> the customer's variants; the simulator picks one with its rng. A
situation is the call's outcome (won, lost), its stage (opening, viewing, closing), the
persona's open objection (price, timing, family), or else how keen the customer is (cool,
warm)."""

CUSTOMER_SAID_AGAIN: dict[tuple[str, str], tuple[str, str]] = {
    ("question", "formal"): (
        "Forgive me for asking again, as I have not had an answer: ",
        "I have now asked {times} times without an answer: ",
    ),
    ("question", "casual"): ("Sorry, you didn't say — ", "That's {times} times I've asked — "),
    ("statement", "formal"): ("As I said, ", "As I have said {times} times now, "),
    ("statement", "casual"): ("Like I said, ", "Like I've said {times} times, "),
}
"""(question or statement, dialect) -> what a customer says before a line they have said
already in the call, the second time and then every later time ({times}: how often they
have said it, this time included): a person who repeats themselves says why."""

CUSTOMER_FAMILY_OPENING: dict[str, str] = {
    "formal": " We are a family of four.",
    "casual": " It's me, my partner and the kids.",
}
"""dialect -> what a customer with children adds to the opening line."""
