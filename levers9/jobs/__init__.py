"""The job platform (workspace schema): jobs, their lifecycle, runner, watcher and progress.

Every app that runs work on a pool's cards (training, evaluation, serving) starts a job here and
registers its job kinds and trainers in levers9.jobs.kinds; nothing here imports an app.
"""
