import {
  DEFAULT_REFRESH,
  JobFollower,
  JobsModel,
  nextInterval,
  progressFraction,
  trimLog
} from '../model';
import { pointsOf } from '../chart';
import { detail, FakeAPI, job, list } from './fixtures';

describe('polling interval', () => {
  const settings = { interval: 1000, idleInterval: 8000 };

  it('stays at the base interval while a job runs', () => {
    expect(nextInterval(4000, settings, true, false)).toBe(1000);
  });

  it('doubles while idle and unchanged, up to the idle interval', () => {
    const waits = [1000];
    for (let i = 0; i < 5; i++) {
      waits.push(nextInterval(waits[waits.length - 1], settings, false, false));
    }
    expect(waits).toEqual([1000, 2000, 4000, 8000, 8000, 8000]);
  });

  it('comes back to the base interval when the list changes', () => {
    expect(nextInterval(8000, settings, false, true)).toBe(1000);
  });
});

describe('pure helpers', () => {
  it('computes progress only when the total is known', () => {
    expect(progressFraction(job({ step: 30, total_steps: 120 }))).toBe(0.25);
    expect(progressFraction(job({ step: 30, total_steps: null }))).toBeNull();
    expect(progressFraction(job({ step: 130, total_steps: 120 }))).toBe(1);
  });

  it('takes a chart series from train records only', () => {
    const records = [
      { kind: 'eval', step: 0, eval_loss: 3 },
      { kind: 'train', step: 10, loss: 2.5, samples_per_second: 40 },
      { kind: 'train', step: 20, loss: 2.0 },
      { kind: 'summary', step: 20, train_runtime: 5 }
    ];
    expect(pointsOf(records, 'loss', 'train')).toEqual([
      { x: 10, y: 2.5 },
      { x: 20, y: 2.0 }
    ]);
    expect(pointsOf(records, 'samples_per_second', 'train')).toEqual([
      { x: 10, y: 40 }
    ]);
  });

  it('trims a long log at a line start', () => {
    expect(trimLog('one\ntwo\nthree\n', 9)).toBe('three\n');
    expect(trimLog('short\n', 100)).toBe('short\n');
  });
});

describe('JobsModel', () => {
  it('holds the server list and says when it changed', async () => {
    const api = new FakeAPI();
    api.lists = [list([job()], 7)];
    const model = new JobsModel(api, DEFAULT_REFRESH);
    let emitted = 0;
    model.changed.connect(() => emitted++);
    expect(model.state.loaded).toBe(false);
    await model.refresh();
    expect(model.state.loaded).toBe(true);
    expect(model.state.jobs.map(j => j.id)).toEqual(['0a1b2c3d']);
    expect(model.state.total).toBe(7);
    expect(model.state.error).toBeNull();
    expect(emitted).toBe(1);
  });

  it('shows a server error as a message and keeps the last list', async () => {
    const api = new FakeAPI();
    api.lists = [
      list([job()]),
      new Error('the job API answered 500: database is locked'),
      list([job()])
    ];
    const model = new JobsModel(api);
    await model.refresh();
    await model.refresh();
    expect(model.state.error).toBe(
      'the job API answered 500: database is locked'
    );
    expect(model.state.jobs).toHaveLength(1);
    await model.refresh();
    expect(model.state.error).toBeNull();
  });

  it('polls fast while jobs run and backs off once they are done', async () => {
    const api = new FakeAPI();
    const done = job({
      status: 'succeeded',
      active: false,
      display: { ...job().display, remaining: '' }
    });
    api.lists = [
      list([job()]),
      list([job()]),
      list([done]),
      list([done]),
      list([done])
    ];
    const model = new JobsModel(api, { interval: 1000, idleInterval: 5000 });
    model.setVisible(true);
    const waits = [];
    for (let i = 0; i < 5; i++) {
      await model.refresh();
      waits.push(model.interval);
    }
    // running, running, just finished (changed), idle, idle
    expect(waits).toEqual([1000, 1000, 1000, 2000, 4000]);
  });

  it('reads the list once per idle interval while its panel is not shown, and at once when it shows', async () => {
    const api = new FakeAPI();
    api.lists = [list([job()]), list([job()]), list([job()]), list([job()])];
    const model = new JobsModel(api, { interval: 1000, idleInterval: 5000 });
    await model.refresh(); // the panel was never shown: a job runs, and still no fast polling
    expect(model.interval).toBe(5000);
    model.setVisible(true);
    expect(model.interval).toBe(1000);
    await model.refresh();
    expect(model.interval).toBe(1000);
    model.setVisible(false);
    await model.refresh();
    expect(model.interval).toBe(5000);
    model.updateSettings({ interval: 2000, idleInterval: 9000 });
    expect(model.interval).toBe(9000);
  });
});

describe('JobFollower', () => {
  it('for a notebook chart reads the job and its metrics only, and is done once an ended job has nothing new', async () => {
    const api = new FakeAPI();
    api.details = [detail({ status: 'succeeded', active: false })];
    api.metricPages = [
      {
        records: [{ kind: 'train', step: 10, loss: 2 }],
        since: 0,
        next: 50,
        status: 'succeeded'
      },
      { records: [], since: 50, next: 50, status: 'succeeded' }
    ];
    const follower = new JobFollower(api, '0a1b2c3d', undefined, false);
    await follower.refresh();
    expect(follower.state.done).toBe(false);
    await follower.refresh();
    expect(api.calls).toEqual([
      'job 0a1b2c3d',
      'metrics 0a1b2c3d since 0 points 500',
      'job 0a1b2c3d',
      'metrics 0a1b2c3d since 50 points 500'
    ]);
    expect(follower.state.done).toBe(true);
    expect(follower.state.records.map(r => r.step)).toEqual([10]);
  });

  it('reads metrics and log incrementally, starting the log at its tail', async () => {
    const api = new FakeAPI();
    api.details = [detail(), detail({ step: 40 })];
    api.metricPages = [
      {
        records: [{ kind: 'train', step: 10, loss: 2 }],
        since: 0,
        next: 50,
        status: 'running'
      },
      {
        records: [{ kind: 'train', step: 20, loss: 1 }],
        since: 50,
        next: 99,
        status: 'running'
      }
    ];
    api.logPages = [
      { text: 'a\n', offset: 0, next: 2, size: 2, status: 'running' },
      { text: 'b\n', offset: 2, next: 4, size: 4, status: 'running' }
    ];
    const follower = new JobFollower(api, '0a1b2c3d');
    await follower.refresh();
    await follower.refresh();
    expect(api.calls).toEqual([
      'job 0a1b2c3d',
      'metrics 0a1b2c3d since 0 points 500',
      'log 0a1b2c3d offset -65536 console',
      'job 0a1b2c3d',
      'metrics 0a1b2c3d since 50 points 500',
      'log 0a1b2c3d offset 2 console'
    ]);
    expect(follower.state.records.map(r => r.step)).toEqual([10, 20]);
    expect(follower.state.log).toBe('a\nb\n');
    expect(follower.state.done).toBe(false);
  });

  it('shows the raw log on request: read again from its tail, even while the job says nothing changed', async () => {
    const api = new FakeAPI();
    api.details = [detail()]; // the same object each time: a 304
    api.metricPages = [
      { records: [], since: 0, next: 0, status: 'running' },
      { records: [], since: 0, next: 0, status: 'running' }
    ];
    api.logPages = [
      { text: 'step 1\n', offset: 0, next: 9, size: 9, status: 'running' },
      {
        text: "{'loss': '1'}\nstep 1\n",
        offset: 0,
        next: 9,
        size: 9,
        status: 'running'
      }
    ];
    const follower = new JobFollower(api, '0a1b2c3d');
    await follower.refresh();
    await follower.showRawLog(true);
    expect(api.calls.filter(call => call.startsWith('log'))).toEqual([
      'log 0a1b2c3d offset -65536 console',
      'log 0a1b2c3d offset -65536 raw'
    ]);
    expect(follower.state.log).toBe("{'loss': '1'}\nstep 1\n");
    expect(follower.state.rawLog).toBe(true);
  });

  it('is done once the job ended and nothing new came', async () => {
    const api = new FakeAPI();
    api.details = [detail({ status: 'succeeded', active: false })];
    api.metricPages = [
      {
        records: [{ kind: 'summary' }],
        since: 0,
        next: 9,
        status: 'succeeded'
      },
      { records: [], since: 9, next: 9, status: 'succeeded' }
    ];
    api.logPages = [
      { text: 'end\n', offset: 0, next: 4, size: 4, status: 'succeeded' },
      { text: '', offset: 4, next: 4, size: 4, status: 'succeeded' }
    ];
    const follower = new JobFollower(api, '0a1b2c3d');
    await follower.refresh();
    expect(follower.state.done).toBe(false);
    await follower.refresh();
    expect(follower.state.done).toBe(true);
  });

  it('asks nothing more while the server says the job did not change, and backs off', async () => {
    const api = new FakeAPI();
    api.details = [detail()]; // the same object each time: what the client returns for a 304
    api.metricPages = [
      {
        records: [{ kind: 'train', step: 10, loss: 2 }],
        since: 0,
        next: 50,
        status: 'running'
      }
    ];
    api.logPages = [
      { text: 'a\n', offset: 0, next: 2, size: 2, status: 'running' }
    ];
    const follower = new JobFollower(api, '0a1b2c3d');
    const waits: number[] = [];
    for (let poll = 0; poll < 4; poll++) {
      await follower.refresh();
      waits.push(follower.interval);
    }
    expect(api.calls).toEqual([
      'job 0a1b2c3d',
      'metrics 0a1b2c3d since 0 points 500',
      'log 0a1b2c3d offset -65536 console',
      'job 0a1b2c3d',
      'job 0a1b2c3d',
      'job 0a1b2c3d'
    ]);
    expect(waits).toEqual([2000, 4000, 8000, 16000]);
    expect(follower.state.records.map(r => r.step)).toEqual([10]);
  });

  it('is shared by every view of a job, and ends with the last view', () => {
    const api = new FakeAPI();
    api.details = [detail()];
    const chart = JobFollower.acquire(api, '0a1b2c3d', undefined, false);
    const view = JobFollower.acquire(api, '0a1b2c3d');
    expect(view).toBe(chart);
    const other = JobFollower.acquire(api, '99999999');
    expect(other).not.toBe(chart);
    other.release();
    chart.release();
    expect(view.isDisposed).toBe(false);
    view.release();
    expect(view.isDisposed).toBe(true);
    const again = JobFollower.acquire(api, '0a1b2c3d');
    expect(again).not.toBe(view);
    again.release();
  });
});
