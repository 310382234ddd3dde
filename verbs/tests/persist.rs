//! A region and its disk image (`redt_verbs::persist`): what a sync makes durable, what the
//! dirty-page bitmap covers, what a power loss keeps, and a restore from the image.

use redt_verbs::persist::{bitmap_bytes, Persistence, VolatileDisk, PAGE_BYTES};
use redt_verbs::Region;
use std::sync::Arc;

fn setup(len: u64) -> (Arc<VolatileDisk>, Arc<Region>) {
    let disk = Arc::new(VolatileDisk::new(len, None));
    let region = Arc::new(Region::new_heap(len));
    let p = Persistence::new(Box::new(disk.clone()), Region::new_heap(bitmap_bytes(len)), len, "test").unwrap();
    region.attach(Arc::new(p)).unwrap();
    (disk, region)
}

#[test]
fn a_sync_makes_every_earlier_write_durable_and_nothing_else_is() {
    let (disk, region) = setup(8 * PAGE_BYTES);
    region.write(100, &[7u8; 10]);
    region.fetch_and_add(3 * PAGE_BYTES, 5);
    region.sync().unwrap();
    region.write(5 * PAGE_BYTES, &[9u8; 8]);
    let image = disk.after_power_loss(&mut |_| false);
    assert_eq!(&image[100..110], &[7u8; 10]);
    assert_eq!(image[(3 * PAGE_BYTES) as usize], 5);
    assert_eq!(image[(5 * PAGE_BYTES) as usize], 0, "written after the sync, never synced");
    assert_eq!(region.persistence().unwrap().dirty_pages(), 1);
}

#[test]
fn marks_cover_exactly_the_pages_touched() {
    let (_, region) = setup(200 * PAGE_BYTES);
    let p = region.persistence().unwrap().clone();
    p.mark(PAGE_BYTES - 1, 2); // pages 0 and 1
    p.mark(63 * PAGE_BYTES, 3 * PAGE_BYTES); // pages 63, 64, 65
    p.mark(199 * PAGE_BYTES, 10 * PAGE_BYTES); // page 199, clipped
    assert_eq!(p.dirty_pages(), 6);
}

#[test]
fn a_lost_sync_keeps_the_old_image_plus_chosen_sectors() {
    let (disk, region) = setup(4 * PAGE_BYTES);
    region.write(0, &[1u8; 8]);
    region.sync().unwrap();
    disk.fail_at_sync(0);
    region.write(0, &[2u8; 8]);
    region.write(PAGE_BYTES, &[3u8; 8]);
    assert!(region.sync().is_err(), "the sync that loses power fails");
    let kept_none = disk.after_power_loss(&mut |_| false);
    assert_eq!(kept_none[0], 1);
    assert_eq!(kept_none[PAGE_BYTES as usize], 0);
    let kept_all = disk.after_power_loss(&mut |_| true);
    assert_eq!(kept_all[0], 2);
    assert_eq!(kept_all[PAGE_BYTES as usize], 3);
}

#[test]
fn concurrent_syncs_each_cover_their_own_writes() {
    let len = 64 * PAGE_BYTES;
    let (disk, region) = setup(len);
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let region = region.clone();
            let disk = disk.clone();
            s.spawn(move || {
                for i in 0..50u64 {
                    let at = (t * 8 + i % 8) * PAGE_BYTES;
                    region.write(at, &(t * 1000 + i + 1).to_le_bytes());
                    region.sync().unwrap();
                    // Durable now: a power loss keeping no pending sector still has it.
                    let image = disk.after_power_loss(&mut |_| false);
                    let got = u64::from_le_bytes(image[at as usize..at as usize + 8].try_into().unwrap());
                    assert!(got > t * 1000 + i, "thread {t} write {i} not durable after its sync");
                }
            });
        }
    });
}

#[test]
fn load_into_copies_the_image_and_clears_the_bitmap() {
    let len = 4 * PAGE_BYTES;
    let disk = Arc::new(VolatileDisk::new(len, Some(vec![5u8; len as usize])));
    let p = Persistence::new(Box::new(disk), Region::new_heap(bitmap_bytes(len)), len, "t").unwrap();
    p.mark(0, 1);
    let region = Region::new_heap(len);
    p.load_into(&region).unwrap();
    let mut b = [0u8; 4];
    region.read(len - 4, &mut b);
    assert_eq!(b, [5u8; 4]);
    assert_eq!(p.dirty_pages(), 0);
}
