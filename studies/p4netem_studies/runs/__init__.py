"""Durable, resumable, parallel and distributed experiment runs.

    store.py      the run's SQLite store (plan, results, attempts, labs, sessions)
    session.py    what a run is: its definition and options, its jobs (condition x repetition,
                  stable keys, seeds, CPU weight), and the plan every lab rebuilds from it
    worker.py     one lab that runs jobs (the same code in a local process or a Ray actor)
    local.py      labs as local processes (--parallel N)
    cluster.py    labs as Ray actors (--ray auto | ADDRESS)
    driver.py     hands jobs to labs, stores each result the moment it arrives, retries loads
                  of labs that died, never stores a load twice
    capacity.py   how many labs this machine can run for these jobs
    identity.py   what must not change between a run and its resume (definition, code, TCP)
    execute.py    run / resume / status with progress on the terminal
"""
