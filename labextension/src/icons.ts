import { LabIcon } from '@jupyterlab/ui-components';

/** The sidebar tab: a loss curve falling across a frame. */
export const jobsIcon = new LabIcon({
  name: 'nbtoolkit:jobs',
  svgstr: `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="none" stroke="#616161" stroke-width="2" stroke-linecap="round" stroke-linejoin="round">
    <path d="M3 3v18h18"/>
    <path d="M6 6c2 6 4 9 7 10s5 1 8 1"/>
  </g>
</svg>`
});
