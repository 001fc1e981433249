import React, { act } from 'react';
import { createRoot, Root } from 'react-dom/client';

import { JobDetail } from '../components/JobDetail';
import { JobList } from '../components/JobList';
import { IJobActions } from '../components/JobRow';
import { polylinePoints } from '../components/LineChart';
import { IJobDetail, IJobSummary } from '../handler';
import { detail, job } from './fixtures';

// render synchronously inside act(), as React expects of a test environment
(globalThis as any).IS_REACT_ACT_ENVIRONMENT = true;

let container: HTMLDivElement;
let root: Root;

/** A job's detail view with no metric records and an empty log, as most of these tests look at it. */
function renderDetail(job: IJobDetail, done = true, charts = true): void {
  act(() =>
    root.render(
      <JobDetail
        job={job}
        records={[]}
        log={''}
        rawLog={false}
        error={null}
        done={done}
        charts={charts}
      />
    )
  );
}

beforeEach(() => {
  container = document.createElement('div');
  document.body.appendChild(container);
  root = createRoot(container);
});

afterEach(() => {
  act(() => root.unmount());
  container.remove();
});

function recordingActions(): IJobActions & { done: string[] } {
  const done: string[] = [];
  const record = (what: string) => (j: IJobSummary) =>
    done.push(`${what} ${j.id}`);
  return {
    done,
    open: record('open'),
    openLog: record('log'),
    insertCell: record('insert'),
    stop: record('stop')
  };
}

function renderList(props: Partial<React.ComponentProps<typeof JobList>> = {}) {
  act(() =>
    root.render(
      <JobList
        jobs={[]}
        total={0}
        loaded={true}
        error={null}
        actions={recordingActions()}
        onRefresh={() => undefined}
        {...props}
      />
    )
  );
}

const query = (selector: string) =>
  container.querySelector(selector) as HTMLElement;
const queryAll = (selector: string) =>
  Array.from(container.querySelectorAll(selector)) as HTMLElement[];

describe('JobList', () => {
  it('shows each job: status, launcher, progress, measures and a loss sparkline', () => {
    const running = job();
    const failed = job({
      id: 'ffff0000',
      name: 'zero3',
      backend: 'deepspeed',
      status: 'failed',
      active: false,
      display: {
        ...job().display,
        status: 'failed',
        remaining: '',
        cost: '',
        projected: ''
      },
      message: 'CUDA out of memory',
      loss_series: []
    });
    renderList({ jobs: [running, failed], total: 2 });

    const rows = queryAll('.nbt-JobRow');
    expect(rows.map(row => row.dataset.jobId)).toEqual([
      '0a1b2c3d',
      'ffff0000'
    ]);
    expect(query('.nbt-JobList-count').textContent).toBe('1 running, 2 in all');

    const first = rows[0];
    expect(first.querySelector('.nbt-JobRow-name')!.textContent).toBe(
      'emotion-bert'
    );
    expect(first.querySelector('.nbt-JobRow-status')!.textContent).toBe(
      'running'
    );
    expect(first.querySelector('.nbt-JobRow-launcher')!.textContent).toBe(
      'torchrun'
    );
    expect(first.querySelector('.nbt-Progress-label')!.textContent).toBe(
      '30/120'
    );
    expect(
      (first.querySelector('.nbt-Progress-fill') as HTMLElement).style.width
    ).toBe('25%');
    expect(first.querySelector('.nbt-JobRow-facts')!.textContent).toBe(
      'loss 0.8123 · 45.2 samples/s · 0:40 elapsed · 2:00 left · $0.05 so far, ~$0.20 in all'
    );
    expect(first.querySelector('.nbt-JobRow-budget')).toBeNull();
    const line = first.querySelector('svg.nbt-Sparkline polyline')!;
    expect(line.getAttribute('points')!.split(' ')).toHaveLength(4);

    const second = rows[1];
    expect(second.querySelector('.nbt-JobRow-message')!.textContent).toBe(
      'CUDA out of memory'
    );
    expect(second.querySelector('svg.nbt-Sparkline')!.classList).toContain(
      'nbt-mod-empty'
    );
  });

  it("shows a grpo job's mean reward where others show their loss", () => {
    const grpo = job({
      task: 'grpo',
      display: { ...job().display, loss: '', reward: '0.750' }
    });
    renderList({ jobs: [grpo], total: 1 });
    expect(query('.nbt-JobRow-facts').textContent).toBe(
      'reward 0.750 · 45.2 samples/s · 0:40 elapsed · 2:00 left · $0.05 so far, ~$0.20 in all'
    );
  });

  it('warns while a job runs past 90% of its budget; one stopped at it says why in its message', () => {
    const summary = '$0.09 of the $0.10 budget spent (92%) at step 40';
    const near = job({
      budget: {
        reached: 'warning',
        cost_usd: 0.092,
        budget_usd: 0.1,
        step: 40,
        summary
      }
    });
    const stopped = job({
      id: 'eeee0000',
      status: 'stopped',
      active: false,
      display: {
        ...job().display,
        status: 'stopped',
        remaining: '',
        projected: '',
        cost: '$0.10'
      },
      budget: {
        reached: 'stopped',
        cost_usd: 0.1,
        budget_usd: 0.1,
        step: 44,
        summary
      },
      message:
        'stopped at its budget: $0.10 of the $0.10 budget spent (100%) at step 44; it saved a checkpoint there'
    });
    renderList({ jobs: [near, stopped] });
    const [running, ended] = queryAll('.nbt-JobRow');
    expect(running.querySelector('.nbt-JobRow-budget')!.textContent).toBe(
      `budget: ${summary}; it stops with a checkpoint at 100%`
    );
    expect(ended.querySelector('.nbt-JobRow-budget')).toBeNull();
    expect(ended.querySelector('.nbt-JobRow-message')!.textContent).toContain(
      'stopped at its budget'
    );
    expect(ended.querySelector('.nbt-JobRow-facts')!.textContent).toContain(
      '$0.10'
    );

    renderDetail(detail(near), false);
    expect(
      query('.nbt-JobDetail-header .nbt-JobRow-budget').textContent
    ).toContain(summary);
    expect(
      query('.nbt-JobDetail-header .nbt-JobRow-facts').textContent
    ).toContain('$0.05 so far, ~$0.20 in all');
  });

  it('says beside a succeeded status that the job learned nothing', () => {
    const warning =
      'learned nothing: the gradient norm is 0 at every logging step since step 10: no weight moves';
    const nothing = job({
      status: 'succeeded',
      active: false,
      display: { ...job().display, status: 'succeeded, but learned nothing' },
      warning
    });
    renderList({ jobs: [nothing, job({ id: 'ffff0000' })] });
    const [row, other] = queryAll('.nbt-JobRow');
    expect(row.querySelector('.nbt-JobRow-status')!.textContent).toBe(
      'succeeded, but learned nothing'
    );
    expect(row.querySelector('.nbt-JobRow-warning')!.textContent).toBe(warning);
    expect(other.querySelector('.nbt-JobRow-warning')).toBeNull();
  });

  it('shows where a running server job answers, and no address for other jobs', () => {
    const url = 'http://127.0.0.1:8000/v1';
    const server = job({
      id: 'eeee0000',
      task: 'serve',
      name: 'serve 0a1b2c3d',
      url
    });
    renderList({ jobs: [server, job()] });
    const [serving, training] = queryAll('.nbt-JobRow');
    const link = serving.querySelector(
      '.nbt-JobRow-url a'
    ) as HTMLAnchorElement;
    expect(link.textContent).toBe(url);
    expect(link.getAttribute('href')).toBe(url);
    expect(training.querySelector('.nbt-JobRow-url')).toBeNull();
  });

  it('offers stop only for jobs that run, and the buttons call the actions', () => {
    const actions = recordingActions();
    const done = job({ id: 'dddd0000', status: 'succeeded', active: false });
    renderList({ jobs: [job(), done], actions });
    const [running, finished] = queryAll('.nbt-JobRow');
    expect(finished.querySelector('[title="Stop job"]')).toBeNull();

    act(() =>
      (running.querySelector('[title="Stop job"]') as HTMLElement).click()
    );
    act(() =>
      (finished.querySelector('[title="Open log"]') as HTMLElement).click()
    );
    act(() =>
      (finished.querySelector('.nbt-JobRow-name') as HTMLElement).click()
    );
    act(() =>
      (running.querySelector('[title^="Insert a %job"]') as HTMLElement).click()
    );
    expect(actions.done).toEqual([
      'stop 0a1b2c3d',
      'log dddd0000',
      'open dddd0000',
      'insert 0a1b2c3d'
    ]);
  });

  it('shows a server error as a message above the last known jobs', () => {
    renderList({ jobs: [job()], error: 'the job API answered 500: disk full' });
    expect(query('[role="alert"]').textContent).toBe(
      'the job API answered 500: disk full'
    );
    expect(queryAll('.nbt-JobRow')).toHaveLength(1);
  });

  it('says how to start a job when there is none, and loading before the first answer', () => {
    renderList({ jobs: [], loaded: true });
    expect(query('.nbt-JobList-note').textContent).toContain('No jobs yet');
    renderList({ jobs: [], loaded: false });
    expect(query('.nbt-JobList-note').textContent).toBe('Loading jobs…');
  });

  it('says when it shows only the newest jobs', () => {
    renderList({ jobs: [job()], total: 250 });
    expect(queryAll('.nbt-JobList-note').map(note => note.textContent)).toEqual(
      ['showing the newest 1 of 250']
    );
  });
});

describe('JobDetail', () => {
  it('draws loss and throughput charts and the log', () => {
    const records = [
      { kind: 'train', step: 10, loss: 2.5, samples_per_second: 40 },
      { kind: 'train', step: 20, loss: 1.5, samples_per_second: 44 },
      { kind: 'train', step: 30, loss: 1.0, samples_per_second: 46 }
    ];
    act(() =>
      root.render(
        <JobDetail
          job={detail()}
          records={records}
          log={'step 30\n'}
          rawLog={false}
          error={null}
          done={false}
          charts={true}
        />
      )
    );
    const charts = queryAll('.nbt-JobDetail-charts svg');
    expect(charts.map(chart => chart.getAttribute('aria-label'))).toEqual([
      'loss',
      'samples/s'
    ]);
    expect(
      charts[0].querySelector('polyline')!.getAttribute('points')!.split(' ')
    ).toHaveLength(3);
    expect(charts[0].textContent).toContain('step 10');
    expect(charts[0].textContent).toContain('step 30');
    expect(query('.nbt-LogTail').textContent).toBe('step 30\n');
  });

  it('shows the forecast beside what the job measured, and where its trackers write', () => {
    const planned = [
      'samples/s          predicted      310.0   measured      275.2   0.89x',
      'hours              predicted       2.00   measured       2.25   1.12x'
    ];
    const tracking = [
      'run name qa-3f9a0c1d',
      'tensorboard /jobs/3f9a0c1d/runs'
    ];
    renderDetail(detail({ planned, tracking }));
    expect(query('.nbt-JobDetail-planned').textContent).toBe(
      planned.join('\n')
    );
    expect(query('.nbt-JobDetail-tracking').textContent).toBe(
      'run name qa-3f9a0c1d · tensorboard /jobs/3f9a0c1d/runs'
    );
    const harness = {
      tasks: ['arc_easy'],
      limit: 200,
      note: 'on the first 200 examples of each task',
      rows: [
        {
          task: 'arc_easy',
          metric: 'acc',
          base: 0.5,
          tuned: 0.625,
          difference: 0.125,
          base_stderr: 0.05,
          tuned_stderr: null
        }
      ]
    };
    renderDetail(detail({ model_from: '3f9a0c1d', harness }));
    expect(query('.nbt-JobDetail-lineage').textContent).toBe('job 3f9a0c1d');
    const cells = queryAll('.nbt-JobDetail-harness tbody td').map(
      cell => cell.textContent
    );
    expect(cells).toEqual([
      'arc_easy',
      'acc',
      '0.5000 ± 0.0500',
      '0.6250',
      '+0.1250'
    ]);
    expect(query('.nbt-JobDetail-harnessNote').textContent).toBe(
      'on the first 200 examples of each task'
    );
    renderDetail(detail());
    expect(query('.nbt-JobDetail-facts')).toBeNull();
  });

  it('shows only the log when asked for the log', () => {
    renderDetail(detail(), false, false);
    expect(query('.nbt-JobDetail-charts')).toBeNull();
    expect(query('.nbt-LogTail').textContent).toBe('no output yet');
  });
});

describe('polylinePoints', () => {
  it('scales a series into the box, larger values higher up', () => {
    const box = {
      width: 102,
      height: 52,
      left: 1,
      right: 1,
      top: 1,
      bottom: 1
    };
    const points = polylinePoints(
      [
        { x: 0, y: 2 },
        { x: 5, y: 1 },
        { x: 10, y: 0 }
      ],
      box
    );
    expect(points).toBe('1,1 51,26 101,51');
  });

  it('draws a flat series through the middle', () => {
    const box = { width: 10, height: 10, left: 0, right: 0, top: 0, bottom: 0 };
    expect(
      polylinePoints(
        [
          { x: 0, y: 3 },
          { x: 1, y: 3 }
        ],
        box
      )
    ).toBe('0,5 10,5');
  });
});
