"""World.moves become named moves with a one-line description each ([{"name", "description"}]).

The lettings world (the one with simulated scenarios) keeps the simulator's eight; every other
world gets the generic set. The data are copied here, not imported, so this migration reads
the same however arena.moves changes later.
"""

from django.db import migrations, models

import arena.models

LETTINGS = [
    ("greet", "Open the call: say who you are and build rapport."),
    ("give_details", "Describe the property: rooms, area, rent and terms."),
    ("confirm", "Check what the customer needs: dates, budget, who will live there."),
    ("handle_objection", "Answer the concern the customer has just raised."),
    ("reassure", "Put the customer at ease: safety, fairness, no pressure."),
    ("propose_viewing", "Suggest coming to see the property in person."),
    ("offer_slot", "Offer a concrete time for the agreed viewing."),
    ("close", "Wrap up: confirm the next step and thank the customer."),
]
GENERIC = [
    ("greet", "Open the conversation and build rapport."),
    ("ask", "Ask about the customer's situation and needs."),
    ("inform", "Explain the offer: what it is, what it costs, why."),
    ("handle_objection", "Answer the concern the customer has raised."),
    ("reassure", "Put the customer at ease: trust, safety, no pressure."),
    ("propose_next_step", "Suggest the concrete next step."),
    ("close", "Wrap up: confirm what was agreed and thank them."),
]


def _moves(pairs):
    return [{"name": name, "description": description} for name, description in pairs]


def describe_moves(apps, schema_editor):
    World = apps.get_model("arena", "World")
    for world in World.objects.all():
        if world.moves and all(isinstance(move, dict) for move in world.moves):
            continue  # already in the new shape
        lettings = world.slug == "lettings" or world.scenarios.exists()
        world.moves = _moves(LETTINGS if lettings else GENERIC)
        world.save(update_fields=["moves"])


def names_only(apps, schema_editor):
    World = apps.get_model("arena", "World")
    for world in World.objects.all():
        world.moves = [move["name"] if isinstance(move, dict) else move for move in world.moves]
        world.save(update_fields=["moves"])


class Migration(migrations.Migration):
    dependencies = [
        ("arena", "0007_imported_preferences"),
    ]

    operations = [
        migrations.AlterField(
            model_name="world",
            name="moves",
            field=models.JSONField(
                default=arena.models.default_moves,
                help_text="The moves the agent can make here, each a name and a one-line "
                "description.",
            ),
        ),
        migrations.RunPython(describe_moves, names_only),
    ]
