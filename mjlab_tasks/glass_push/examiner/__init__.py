"""The glass examiner: the world it runs on the GlassPush environment and
the processes and clients around it (docs/glass_push.md).

- ``world.py``: ``GlassWorld``, the tables of one GlassPush environment (one
  table per environment, either engine), answering the examiner's calls;
- ``routine.py``: the push routine and ``follow()``, written once;
- ``hand.py``: ``HandRunner``, the hand that runs them (compiled on the C
  engine);
- ``pictures.py``: the top view and the films (OpenGL at the first picture);
- ``server.py``: the worker process that holds a world and answers;
- ``workers.py``: starting, asking and closing worker processes;
- ``client.py``: what a solution holds (``Examiner``, ``ExaminerBatch``)
  and the training interface (``TrainingExaminer``);
- ``exam.py``: the runner's side (``Exam``: records, films, lockstep runs).

Importing this package imports nothing; ``client.py`` and ``exam.py``
import neither mjlab nor MuJoCo.
"""
