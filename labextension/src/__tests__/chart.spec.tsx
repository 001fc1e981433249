import React, { act } from 'react';
import { createRoot, Root } from 'react-dom/client';

import {
  axesOf,
  chartOptions,
  fraction,
  lossSeries,
  pickableSeries,
  smoothed,
  valuesAt
} from '../chart';
import { JobChart } from '../components/JobChart';

(globalThis as any).IS_REACT_ACT_ENVIRONMENT = true;

const train = (step: number, loss: number) => ({ kind: 'train', step, loss });
const evaluation = (step: number, loss: number) => ({
  kind: 'eval',
  step,
  eval_loss: loss
});
const first = {
  id: 'aaaa1111',
  name: 'bert',
  records: [
    train(1, 4),
    train(2, 2),
    evaluation(2, 3),
    train(3, 1),
    evaluation(3, 2)
  ]
};
const second = {
  id: 'bbbb2222',
  name: 'gpt2',
  records: [train(1, 8), train(2, 6)]
};

describe('smoothing', () => {
  it('is a debiased moving average: the first point is kept, later ones lag toward the past', () => {
    // by hand: 0.5*0 + 0.5*4 = 2 -> /0.5 = 4; 0.5*2 + 0.5*2 = 2 -> /0.75 = 2.667; 0.5*2 + 0.5*1 = 1.5 -> /0.875
    const values = smoothed([4, 2, 1], 0.5);
    expect(values[0]).toBeCloseTo(4);
    expect(values[1]).toBeCloseTo(8 / 3);
    expect(values[2]).toBeCloseTo(1.5 / 0.875);
  });

  it('with weight 0 leaves the values as they are', () => {
    expect(smoothed([4, 2, 1], 0)).toEqual([4, 2, 1]);
  });
});

describe('loss series', () => {
  it('gives a job its train loss (smoothed over the raw one) and its eval loss, in one colour', () => {
    const series = lossSeries([first], { smoothing: 0.5, logScale: false });
    expect(series.map(line => line.label)).toEqual(['train loss', 'eval loss']);
    const [trainLine, evalLine] = series;
    expect(trainLine.raw).toEqual([
      { x: 1, y: 4 },
      { x: 2, y: 2 },
      { x: 3, y: 1 }
    ]);
    expect(trainLine.points.map(point => point.x)).toEqual([1, 2, 3]);
    expect(trainLine.points[1].y).toBeCloseTo(8 / 3);
    expect(evalLine.points).toEqual([
      { x: 2, y: 3 },
      { x: 3, y: 2 }
    ]);
    expect(evalLine.raw).toEqual([]);
    expect(trainLine.color).toBe(evalLine.color);
  });

  it('without smoothing draws the raw train loss alone', () => {
    const [trainLine] = lossSeries([first], { smoothing: 0, logScale: false });
    expect(trainLine.points).toEqual([
      { x: 1, y: 4 },
      { x: 2, y: 2 },
      { x: 3, y: 1 }
    ]);
    expect(trainLine.raw).toEqual([]);
  });

  it('names each job in its labels and gives each job its own colour when there are several', () => {
    const series = lossSeries([first, second], {
      smoothing: 0,
      logScale: false
    });
    expect(series.map(line => line.label)).toEqual([
      'bert (aaaa1111) train loss',
      'bert (aaaa1111) eval loss',
      'gpt2 (bbbb2222) train loss' // no eval records: no eval series
    ]);
    expect(new Set(series.map(line => line.color)).size).toBe(2);
  });

  it('reads the options of a job reference, clamped, with the defaults', () => {
    expect(chartOptions({ job_ids: ['x'] })).toEqual({
      smoothing: 0.6,
      logScale: false
    });
    expect(
      chartOptions({
        job_ids: ['x'],
        options: { smoothing: 2, log_scale: true }
      })
    ).toEqual({ smoothing: 0.99, logScale: true });
  });
});

describe('axes and hover', () => {
  it('a log axis places values by their logarithm and leaves out what it cannot show', () => {
    const series = lossSeries(
      [
        {
          id: 'c',
          name: 'c',
          records: [train(1, 0), train(2, 1), train(3, 100)]
        }
      ],
      { smoothing: 0, logScale: true }
    );
    const axes = axesOf(series, true)!;
    expect(axes.y).toEqual({ min: 1, max: 100, log: true });
    expect(fraction(10, axes.y)).toBeCloseTo(0.5);
    expect(fraction(0, axes.y)).toBeNull();
    expect(fraction(50.5, axesOf(series, false)!.y)).toBeCloseTo(0.505);
  });

  it('lists each series value nearest the pointer step', () => {
    const series = lossSeries([first, second], {
      smoothing: 0,
      logScale: false
    });
    expect(
      valuesAt(series, 2.4).map(({ series: line, point }) => [
        line.label,
        point
      ])
    ).toEqual([
      ['bert (aaaa1111) train loss', { x: 2, y: 2 }],
      ['bert (aaaa1111) eval loss', { x: 2, y: 3 }],
      ['gpt2 (bbbb2222) train loss', { x: 2, y: 6 }]
    ]);
  });
});

describe('JobChart', () => {
  let container: HTMLDivElement;
  let root: Root;
  beforeEach(() => {
    container = document.createElement('div');
    document.body.appendChild(container);
    root = createRoot(container);
  });
  afterEach(() => {
    act(() => root.unmount());
    container.remove();
  });

  it('draws every job in its colour with a legend, lists the steps it drew, and follows its controls', () => {
    act(() =>
      root.render(
        <JobChart
          jobs={[first, second]}
          options={{ smoothing: 0.6, logScale: false }}
          width={400}
          height={160}
        />
      )
    );
    const lines = Array.from(
      container.querySelectorAll('polyline.nbt-JobChart-line')
    );
    expect(
      lines.map(line => [
        line.getAttribute('data-series'),
        line.getAttribute('data-steps')
      ])
    ).toEqual([
      ['bert (aaaa1111) train loss', '1,2,3'],
      ['bert (aaaa1111) eval loss', '2,3'],
      ['gpt2 (bbbb2222) train loss', '1,2']
    ]);
    expect(lines[0].getAttribute('stroke')).not.toBe(
      lines[2].getAttribute('stroke')
    );
    expect(
      Array.from(container.querySelectorAll('.nbt-JobChart-legend li')).map(
        item => item.textContent
      )
    ).toHaveLength(3);
    expect(
      container.querySelectorAll('polyline.nbt-JobChart-raw')
    ).toHaveLength(2); // smoothed: raw lines under

    const smoothing = container.querySelector(
      'input[type=range]'
    ) as HTMLInputElement;
    act(() => {
      const setValue = Object.getOwnPropertyDescriptor(
        HTMLInputElement.prototype,
        'value'
      )!.set!;
      setValue.call(smoothing, '0');
      smoothing.dispatchEvent(new Event('input', { bubbles: true }));
    });
    expect(
      container.querySelectorAll('polyline.nbt-JobChart-raw')
    ).toHaveLength(0);

    const log = container.querySelector(
      'input[type=checkbox]'
    ) as HTMLInputElement;
    act(() => log.click());
    expect(log.checked).toBe(true);

    const svg = container.querySelector('svg.nbt-JobChart-plot')!;
    act(() => {
      svg.dispatchEvent(
        new MouseEvent('mousemove', { bubbles: true, clientX: 56 + 336 })
      );
    });
    // jsdom lays nothing out (the box is at 0,0): x = 56 + the plot's full width is the last step
    expect(
      container.querySelector('.nbt-JobChart-hover')!.textContent
    ).toContain('bert (aaaa1111) train loss @ step 3: 1.00');
  });

  it('says so when there is nothing to draw yet', () => {
    act(() =>
      root.render(
        <JobChart
          jobs={[{ id: 'x', name: 'x', records: [] }]}
          options={{ smoothing: 0, logScale: false }}
          width={400}
          height={160}
        />
      )
    );
    expect(container.textContent).toContain('loss: no data yet');
  });
});

describe('pickableSeries', () => {
  it('lists a reward run its rewards first, and never the loss or the bookkeeping', () => {
    const records = [
      {
        kind: 'train',
        step: 1,
        epoch: 0.1,
        loss: 0.69,
        learning_rate: 0.001,
        reward: 0.1,
        'rewards/digit_share/mean': 0.1,
        'completions/mean_length': 8
      },
      { kind: 'eval', step: 1, eval_loss: 0.7 }
    ];
    expect(pickableSeries(records)).toEqual([
      'reward',
      'rewards/digit_share/mean',
      'completions/mean_length',
      'learning_rate'
    ]);
    expect(pickableSeries([train(1, 2)])).toEqual([]);
    const rewardModel = [
      {
        kind: 'train',
        step: 1,
        loss: 0.7,
        accuracy: 0.5,
        margin: 0.1,
        mean_reward: -0.2,
        min_reward: -1
      }
    ];
    expect(pickableSeries(rewardModel)).toEqual([
      'accuracy',
      'margin',
      'mean_reward',
      'min_reward'
    ]);
  });
});
